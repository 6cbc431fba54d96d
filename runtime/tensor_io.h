/* Tensors on disk: numpy .npy (read and write) and ONNX TensorProto .pb (read). */
#ifndef QR_TENSOR_IO_H
#define QR_TENSOR_IO_H

#include <stdio.h>

#include "status.h"
#include "tensor.h"

/* Reads a .npy file (C order; f32 f64 f16 i8 u8 i16 u16 i32 u32 i64 u64 bool);
 * t->data is malloc'd. Errors name the file and the problem. */
qr_status qr_npy_read(const char *path, qr_tensor *t, qr_error *e);
qr_status qr_npy_parse(const unsigned char *buf, size_t len, const char *path, qr_tensor *t, qr_error *e);
/* Writes t atomically (temporary file, then rename). */
qr_status qr_npy_write(const char *path, const qr_tensor *t, qr_error *e);
/* The header of a .npy file of t's dtype and dims to f (t->data unused): the data that follows,
 * in C order, makes the file (written a slice at a time). */
qr_status qr_npy_write_header(FILE *f, const qr_tensor *t, qr_error *e);
/* Maps a .npy file instead of reading it (read-only: t->data must not be written): its pages are read as they are
 * touched and may leave memory again, so a file larger than RAM can be walked through; no size
 * limit. t->data is freed by qr_data_free (qr_tensor_free). bool (normalized to 0/1) and
 * misaligned data are read instead. */
qr_status qr_npy_map(const char *path, qr_tensor *t, qr_error *e);
/* The .npy files of folder dir (hidden ones left out) in bytewise name order as one tensor, their
 * samples (first dims) one after the other: every shard must hold the first's dtype and dims
 * after the first. Errors name the shard. t->data is freed by qr_data_free. */
qr_status qr_npy_read_shards(const char *dir, qr_tensor *t, qr_error *e);
/* Calibration data: a folder of .npy shards, a mapped .npy, else qr_tensor_read_file. */
qr_status qr_tensor_read_calib(const char *path, qr_tensor *t, qr_error *e);
/* Model inputs: a mapped .npy (qr_npy_map: a run walks it a slice at a time), else
 * qr_tensor_read_file. */
qr_status qr_tensor_read_input(const char *path, qr_tensor *t, qr_error *e);
/* Reads a tensor from a file chosen by extension: .npy or .pb. */
qr_status qr_tensor_read_file(const char *path, qr_tensor *t, qr_error *e);

#endif
