/* The CPU's cache sizes (runtime/cpu.h) against the kernel's own reading of them,
 * /sys/devices/system/cpu/cpu0/cache/index*: the level, the type and the size of each cache. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cpu.h"

/* The size sysfs gives cpu0's data or unified cache of this level (0: none listed). */
static size_t sysfs_cache_bytes(int level)
{
    for (int i = 0; i < 16; i++) {
        char path[128], type[32] = "";
        int lv = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            break;
        int ok = fscanf(f, "%d", &lv) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (!ok || !(f = fopen(path, "r")))
            continue;
        ok = fscanf(f, "%31s", type) == 1;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!ok || lv != level || !strcmp(type, "Instruction") || !(f = fopen(path, "r")))
            continue;
        unsigned long v = 0;
        char unit = 0;
        ok = fscanf(f, "%lu%c", &v, &unit) >= 1;
        fclose(f);
        if (ok)
            return (size_t)v * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
    }
    return 0;
}

Test(cpu, cache_sizes_are_the_kernels)
{
    int checked = 0;
    for (int level = 1; level <= 3; level++) {
        size_t want = sysfs_cache_bytes(level);
        if (!want)
            continue;
        cr_expect_eq(qr_cpu_cache_bytes(level, 7), want, "L%d: %zu bytes, sysfs says %zu", level,
                     qr_cpu_cache_bytes(level, 7), want);
        checked++;
    }
    if (!checked)
        cr_skip_test("no /sys/devices/system/cpu/cpu0/cache on this machine");
}

Test(cpu, a_level_without_a_cache_gives_the_fallback)
{
    cr_expect_eq(qr_cpu_cache_bytes(0, 12345), 12345);
    cr_expect_eq(qr_cpu_cache_bytes(4, 777), 777);
}

Test(cpu, the_description_names_the_caches)
{
    char buf[256];
    qr_cpu_describe(buf, sizeof buf);
    char l2[64];
    snprintf(l2, sizeof l2, "L2 %zu KB", qr_cpu_cache_bytes(2, 0) >> 10);
    cr_expect(strstr(buf, l2) != NULL, "%s has no '%s'", buf, l2);
    cr_expect(strstr(buf, " family ") != NULL, "%s", buf);
}
