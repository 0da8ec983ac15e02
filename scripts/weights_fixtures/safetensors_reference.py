"""Writes tests/fixtures/weights/reference.safetensors with Python's `safetensors` writer: one tensor
of every dtype LibTorch and safetensors share, an empty one, and metadata. The values follow a rule
the C++ test (tests/sdk/io/safetensors_test.cpp) recomputes: element i of a tensor is (i + 1) * step,
cast to its dtype. The test reads the file and checks every value, then writes the same tensors and
checks that its data section equals this file's byte for byte and its header the same JSON."""
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

def ramp(dtype, shape, step):
    n = 1
    for d in shape:
        n *= d
    values = torch.arange(1, n + 1, dtype=torch.float64) * step
    return values.to(dtype).reshape(shape)

def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tensors = {
        "f32": ramp(torch.float32, (2, 3), 0.25),
        "f64": ramp(torch.float64, (3,), -1.5),
        "f16": ramp(torch.float16, (2, 2), 0.5),
        "bf16": ramp(torch.bfloat16, (2, 2), 0.75),
        "i64": ramp(torch.int64, (2,), -3),
        "i32": ramp(torch.int32, (3,), 7),
        "i16": ramp(torch.int16, (2,), -2),
        "i8": ramp(torch.int8, (4,), 3),
        "u8": ramp(torch.uint8, (3,), 5),
        "bool": torch.tensor([True, False, True]),
        "empty": torch.zeros((0, 3), dtype=torch.float32),
        "unet.down.0.weight": ramp(torch.float32, (2, 1, 3, 3), 0.125),
    }
    # Python's writer orders the metadata as a hash map does: the test compares headers as JSON.
    metadata = {"format": "pt", "privdiff.fixture": "reference", "note": "ünïcode ok"}
    path = out / "reference.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    back = load_file(str(path))
    assert all(torch.equal(back[k], v) for k, v in tensors.items())
    print(f"wrote {path} ({path.stat().st_size} bytes)")

if __name__ == "__main__":
    main(Path(sys.argv[1]))
