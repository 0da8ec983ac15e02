"""TensorBoard's event files written by tensorboard's own RecordWriter and Event protos: the bytes
privdiff's encoder (core/run/tensorboard_events.cpp) must reproduce (tests/core/tensorboard_events_test.cpp).

Usage: tensorboard_reference.py OUT_DIR              writes OUT_DIR/scalars.tfevents
       tensorboard_reference.py --read RUN_DIR       prints the scalars TensorBoard reads from a run's
                                                     events.out.tfevents.privdiff (a check by hand)
"""
import os
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.record_writer import RecordWriter


def scalars(wall_time, step, values):
    summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in values])
    return event_pb2.Event(wall_time=wall_time, step=step, summary=summary)


# The events of the C++ test, in its order: defaults left out (wall time 0, step 0), a value of 0
# kept (a oneof member), a large step and wall time, a non-ASCII tag, a negative value.
EVENTS = [
    event_pb2.Event(wall_time=0, file_version="brain.Event:2"),
    scalars(12.5, 1, [("train/loss", 0.75), ("train/epsilon", 1.25)]),
    scalars(0, 2, [("train/epsilon", 2.5), ("train/grad_norm", 0.0)]),
    scalars(1e9 + 0.125, 300000, [("eval/dpdm_classifiers/accuracy.logreg", 0.7), ("\u00fcn\u00efcode/\u00e9", -1.5)]),
    scalars(3.0, 0, [("query/epsilon", 0.17)]),
]


def write(out_dir):
    path = os.path.join(out_dir, "scalars.tfevents")
    with open(path, "wb") as f:
        writer = RecordWriter(f)
        for event in EVENTS:
            writer.write(event.SerializeToString())
        writer.flush()
    # Read back as TensorBoard does: every scalar is there.
    acc = EventAccumulator(path)
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == sorted({t for e in EVENTS[1:] for t in (v.tag for v in e.summary.value)})
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def read(run_dir):
    acc = EventAccumulator(os.path.join(run_dir, "events.out.tfevents.privdiff"))
    acc.Reload()
    for tag in sorted(acc.Tags()["scalars"]):
        points = acc.Scalars(tag)
        print(f"{tag}: {len(points)} points, steps {points[0].step}..{points[-1].step}, last {points[-1].value:.6g}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--read":
        read(sys.argv[2])
    elif len(sys.argv) == 2:
        write(sys.argv[1])
    else:
        sys.exit(__doc__)
