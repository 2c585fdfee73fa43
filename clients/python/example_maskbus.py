#!/usr/bin/env python3
"""Print, for each mask maskd publishes, how much of the frame is person and how late the mask arrived.
usage: example_maskbus.py [INSTANCE]   (default video0; MASKBUS_LIB=path/to/libmaskbus.so.1 if not installed)"""
import sys

import maskbus

instance = sys.argv[1] if len(sys.argv) > 1 else "video0"
with maskbus.Reader(instance) as bus:
    for frame in bus.frames(timeout=10.0):
        mask = frame.planes.get("mask")
        if mask is None:
            continue
        person = (mask.mean() / 255.0) if hasattr(mask, "mean") else sum(mask) / 255.0 / len(mask)
        print("frame %d  %dx%d  person %.1f%%  latency %.0f us  missed %d  boxes %d"
              % (frame.frame_seq, frame.width, frame.height, 100 * person, frame.latency_us, frame.missed,
                 len(frame.detections)))
