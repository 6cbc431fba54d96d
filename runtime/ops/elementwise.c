#include "ops_common.h"

const qr_op_def qr_ops_elementwise[] = {
    {0},
};
