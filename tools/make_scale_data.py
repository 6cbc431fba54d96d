#!/usr/bin/python3
"""Fixtures of tests/e2e/test_data_scale.c (calibration data and models at scale), from
build/data/calib_images.npy (Fashion-MNIST, 1x28x28 f32) into OUT:

  one.npy            the first 200 samples, one file (the oracle of the folder of shards)
  shards/            the same 200 samples in 3 shards (p0.npy 70, p1.npy 1, p2.npy 129), plus a
                     README.txt and a hidden .p9.npy (both must be left out of the stream)
  bad_empty/         a folder without .npy files
  bad_dtype/         a second shard in f64
  bad_shape/         a second shard of 1x27x28 samples
  bad_trunc/         a second shard 100 bytes short
  big.npy            BIG_MB MB of samples (sparse: zeros past the first 200, which are one.npy's)
  x.npy              16 test samples, to run models on
  ext/model.onnx     MODEL (examples/fmnist/fmnist_cnn.onnx) with every initializer in ONNX external
                     data, ext/weights/fmnist.bin (onnx.save(..., save_as_external_data=True))
  weights.onnx       y = x + W, z = x * B, u = Neg(C) (opset 17), x f32[300,257]: W f32[300,257]
                     (308 KB: a block of its own in QRL) with a doc_string after its raw_data, B
                     f32[257] (1 KB: unpacked by protobuf-c as before), C f32[1200] (4.8 KB), at
                     offsets that are not multiples of 4 in the file; wx.npy (x, both signs) and
                     numpy's y, z, u (weights_y.npy, ...): what QRL's in-place read of the
                     initializers must give

Usage: make_scale_data.py DATA_DIR OUT MODEL [BIG_MB]
"""
import os
import sys

import numpy as np


def main():
    data, out = sys.argv[1], sys.argv[2]
    model = sys.argv[3]
    big_mb = int(sys.argv[4]) if len(sys.argv) > 4 else 1500
    x = np.load(os.path.join(data, 'calib_images.npy'))[:200]
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, 'one.npy'), x)
    sh = os.path.join(out, 'shards')
    os.makedirs(sh, exist_ok=True)
    for name, part in (('p0', x[:70]), ('p1', x[70:71]), ('p2', x[71:])):
        np.save(os.path.join(sh, name + '.npy'), part)
    np.save(os.path.join(sh, '.p9.npy'), x[:3] * 1000)
    with open(os.path.join(sh, 'README.txt'), 'w') as f:
        f.write('not a shard\n')
    for d in ('bad_empty', 'bad_dtype', 'bad_shape', 'bad_trunc'):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    with open(os.path.join(out, 'bad_empty', 'notes.txt'), 'w') as f:
        f.write('no shards here\n')
    np.save(os.path.join(out, 'bad_dtype', 'a.npy'), x[:5])
    np.save(os.path.join(out, 'bad_dtype', 'b.npy'), x[5:9].astype(np.float64))
    np.save(os.path.join(out, 'bad_shape', 'a.npy'), x[:5])
    np.save(os.path.join(out, 'bad_shape', 'b.npy'), x[5:9, :, :27, :])
    np.save(os.path.join(out, 'bad_trunc', 'a.npy'), x[:5])
    np.save(os.path.join(out, 'bad_trunc', 'b.npy'), x[5:9])
    b = os.path.join(out, 'bad_trunc', 'b.npy')
    os.truncate(b, os.path.getsize(b) - 100)
    per = x[0].nbytes
    n = big_mb * 1024 * 1024 // per
    with open(os.path.join(out, 'big.npy'), 'wb') as f:
        np.lib.format.write_array_header_1_0(f, {'descr': '<f4', 'fortran_order': False,
                                                 'shape': (n,) + x.shape[1:]})
        f.write(x.tobytes())
        f.truncate(f.tell() - x.nbytes + n * per)  # a hole: no disk, reads as zeros
    np.save(os.path.join(out, 'x.npy'), np.load(os.path.join(data, 'test_images.npy'))[:16])
    import onnx
    os.makedirs(os.path.join(out, 'ext', 'weights'), exist_ok=True)
    onnx.save(onnx.load(model), os.path.join(out, 'ext', 'model.onnx'), save_as_external_data=True,
              all_tensors_to_one_file=True, location='weights/fmnist.bin', size_threshold=0)
    weights_model(out)


def weights_model(out):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(7)
    x = rng.standard_normal((300, 257), dtype=np.float32)
    w = rng.standard_normal((300, 257), dtype=np.float32) * 3
    b = rng.standard_normal(257, dtype=np.float32)
    c = rng.standard_normal(1200, dtype=np.float32)
    def build(names):
        inits = []
        for name, a in zip(names, (w, b, c)):
            t = numpy_helper.from_array(a, name)
            if a is w:
                t.doc_string = 'a field written after raw_data'
            inits.append(t)
        nodes = [helper.make_node('Add', ['x', names[0]], ['y']), helper.make_node('Mul', ['x', names[1]], ['z']),
                 helper.make_node('Neg', [names[2]], ['u'])]
        g = helper.make_graph(nodes, 'weights', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [300, 257])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, [300, 257]),
                               helper.make_tensor_value_info('z', TensorProto.FLOAT, [300, 257]),
                               helper.make_tensor_value_info('u', TensorProto.FLOAT, [1200])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]).SerializeToString()

    # names lengthened until no initializer's data starts at a multiple of 4 in the file
    for k in range(64):
        names = ['W' + 'w' * (k % 4), 'B' + 'b' * (k // 4 % 4), 'C' + 'c' * (k // 16)]
        data = build(names)
        if all(data.find(a.tobytes()) % 4 for a in (w, b, c)):
            break
    else:
        raise SystemExit('weights.onnx: no names put the data off 4-byte offsets')
    with open(os.path.join(out, 'weights.onnx'), 'wb') as f:
        f.write(data)
    np.save(os.path.join(out, 'wx.npy'), x)
    np.save(os.path.join(out, 'weights_y.npy'), x + w)
    np.save(os.path.join(out, 'weights_z.npy'), x * b)
    np.save(os.path.join(out, 'weights_u.npy'), -c)


if __name__ == '__main__':
    main()
