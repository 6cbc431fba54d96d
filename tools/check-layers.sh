#!/bin/sh
# The layering of quantizer/README.md, as the build enforces it: each folder's
# objects are compiled with only the include paths of the layers it may use
# (INC_<layer> in the Makefile), and a relative include ("../x/y.h") may not
# climb into a layer that is not one of them. Checks both, and that the
# allowed headers still compile, so a probe cannot pass by failing for an
# unrelated reason. Prints one line per breach and exits 1 on any.
# Usage: CC=... INC_runtime=... (one per layer, as `make check` passes them) tools/check-layers.sh BUILD_DIR
B=${1:-build}
CC=${CC:-cc}
dir=$B/layers
mkdir -p "$dir"
bad=0

# probe LAYER HEADER ok|fail: a file of LAYER's folder including HEADER compiles, or must not.
probe() {
    eval "inc=\$INC_$1"
    printf '#include "%s"\n' "$2" > "$dir/probe_$1.c"
    # -iquote: the layer's own folder, as for its own files.
    if $CC -std=c11 -D_DEFAULT_SOURCE -fsyntax-only -iquote "$1" $inc "$dir/probe_$1.c" 2> "$dir/probe_$1.err"; then
        got=ok
    else
        got=fail
    fi
    if [ "$got" != "$3" ]; then
        echo "layers: $1/ including \"$2\": expected $3, got $got (INC_$1 = '$inc')"
        [ "$got" = fail ] && sed 's/^/    /' "$dir/probe_$1.err" | head -n 5
        bad=1
    fi
}

probe lang      source.h   ok
probe lang      graph.h    fail
probe lang      parse.h    fail
probe grammar   parse.h    ok
probe grammar   graph.h    fail
probe grammar   check.h    fail
probe runtime   graph.h    ok
probe runtime   qrl.h      ok
probe runtime   quantize.h fail
probe runtime   intgraph.h fail
probe runtime   match.h    fail
probe runtime   check.h    fail
probe runtime   cli.h      fail
probe quantizer quantize.h ok
probe quantizer exec.h     ok
probe quantizer check.h    fail
probe quantizer compile.h  fail
probe quantizer cli.h      fail
probe compiler  recipe.h   ok
probe compiler  qrl.h      ok
probe compiler  check.h    ok
probe compiler  quantize.h fail
probe compiler  match.h    fail
probe compiler  cli.h      fail
probe api       qrl.h      ok
probe api       check.h    ok
probe api       quantize.h ok
probe api       api_model.h ok
probe api       cli.h      fail
probe cli       qrl.h      ok
probe cli       cli.h      ok
probe cli       check.h    fail
probe cli       compile.h  fail
probe cli       quantize.h fail
probe cli       intgraph.h fail
probe cli       graph.h    fail
probe cli       exec.h     fail
probe cli       tensor_io.h fail
probe cli       api_model.h fail

# The folders a layer's relative includes may reach (its own first).
allowed() {
    case $1 in
    lang) echo "lang" ;;
    grammar) echo "grammar lang" ;;
    runtime) echo "runtime include" ;;
    quantizer) echo "quantizer runtime include" ;;
    compiler) echo "compiler grammar lang runtime include" ;;
    api) echo "api include compiler quantizer runtime grammar lang" ;;
    cli) echo "cli include" ;;
    esac
}

root=$(pwd)
for layer in lang grammar runtime quantizer compiler api cli; do
    ok=$(allowed $layer)
    for f in $(find $layer -name '*.c' -o -name '*.h' -o -name '*.y' -o -name '*.re' | sort); do
        grep -o '^[[:space:]]*#[[:space:]]*include[[:space:]]*"\.\./[^"]*"' "$f" | sed 's/.*"\(.*\)"/\1/' |
            while read -r rel; do
                target=$(realpath -m "$(dirname "$f")/$rel")
                top=${target#"$root"/}
                top=${top%%/*}
                case " $ok " in
                *" $top "*) ;;
                *) echo "layers: $f includes \"$rel\" ($top/), which $layer/ may not use"; echo x ;;
                esac
            done
    done
done > "$dir/relative.txt"
if grep -q '^x$' "$dir/relative.txt"; then
    grep -v '^x$' "$dir/relative.txt"
    bad=1
fi

[ $bad -eq 0 ] && echo "layers: every layer sees only the layers below it"
exit $bad
