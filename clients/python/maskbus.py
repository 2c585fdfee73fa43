"""maskbus: read the person masks maskd publishes on its frame bus, from Python.

A thin ctypes binding of libmaskbus (the C library that implements the bus protocol of maskbus_abi.h), so the
seqlock, futex wait and writer-liveness rules are the library's own. Planes come back as numpy arrays when numpy is
installed, else as bytes.

    import maskbus
    with maskbus.Reader("video0") as bus:
        for frame in bus.frames(timeout=5.0):
            mask = frame.planes["mask"]          # (height, width) uint8, 255 = person
            print(frame.seq, frame.latency_us, frame.detections)

The library is looked up in $MASKBUS_LIB, then as libmaskbus.so.1 on the system's library path.
"""
import ctypes
import ctypes.util
import os

try:
    import numpy as _np
except ImportError:  # planes become bytes
    _np = None

MAX_PLANES = 4
MAX_DETECTIONS = 32
PLANE_NAMES = ("mask", "alpha", "frame", "disp")

_FRAME, _TIMEOUT, _GONE, _RESTARTED = 1, 2, 3, 4

_u32, _u64, _i32, _f32 = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_float


class Detection(ctypes.Structure):
    _fields_ = [("class_id", _i32), ("score", _f32), ("x", _f32), ("y", _f32), ("w", _f32), ("h", _f32),
                ("track_id", _u32), ("flags", _u32)]

    def as_dict(self):
        return {k: getattr(self, k) for k, _ in self._fields_}


class _Plane(ctypes.Structure):
    _fields_ = [("format", _u32), ("width", _u32), ("height", _u32), ("stride", _u32), ("offset", _u64),
                ("size", _u64)]


class _Frame(ctypes.Structure):  # maskbus_frame_t
    _fields_ = [("publish_seq", _u64), ("frame_seq", _u64), ("capture_ns", _u64), ("publish_ns", _u64),
                ("wake_ns", _u64), ("read_ns", _u64), ("writer_epoch", _u64), ("missed", _u64),
                ("width", _u32), ("height", _u32), ("planes", _u32), ("flags", _u32), ("ndetections", _u32),
                ("detections", Detection * MAX_DETECTIONS), ("plane", _Plane * MAX_PLANES),
                ("data", ctypes.c_void_p * MAX_PLANES), ("slot", _u32), ("gen", _u64), ("layout_gen", _u32)]


class _Opts(ctypes.Structure):  # maskbus_reader_opts_t
    _fields_ = [("in_place", ctypes.c_int), ("no_register", ctypes.c_int)]


class _Status(ctypes.Structure):  # maskbus_status_t
    _fields_ = [("writer_alive", ctypes.c_int), ("writer_pid", _i32), ("writer_epoch", _u64),
                ("heartbeat_age_ns", _u64), ("publish_count", _u64), ("torn_retries", _u64), ("remaps", _u64)]


class MaskbusError(OSError):
    """An error of libmaskbus: .code is the negative MASKBUS_E* value."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _load(path=None):
    path = path or os.environ.get("MASKBUS_LIB") or ctypes.util.find_library("maskbus") or "libmaskbus.so.1"
    lib = ctypes.CDLL(path)
    lib.maskbus_reader_open.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Opts), ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.c_char_p, ctypes.c_size_t]
    lib.maskbus_reader_next.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_Frame)]
    lib.maskbus_reader_status.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Status)]
    lib.maskbus_reader_error.argtypes = [ctypes.c_void_p]
    lib.maskbus_reader_error.restype = ctypes.c_char_p
    lib.maskbus_reader_close.argtypes = [ctypes.c_void_p]
    lib.maskbus_reader_close.restype = None
    lib.maskbus_strerror.restype = ctypes.c_char_p
    lib.maskbus_frame_size.restype = ctypes.c_size_t
    lib.maskbus_reader_opts_size.restype = ctypes.c_size_t
    lib.maskbus_now_ns.restype = _u64
    if lib.maskbus_frame_size() != ctypes.sizeof(_Frame) or lib.maskbus_reader_opts_size() != ctypes.sizeof(_Opts):
        raise ImportError("%s does not match this binding (frame struct %d vs %d bytes)"
                          % (path, lib.maskbus_frame_size(), ctypes.sizeof(_Frame)))
    return lib


class Frame:
    """One frame read from the bus. planes: {"mask": array, ...} for the planes present (copies, safe to keep)."""

    def __init__(self, f):
        self.seq = f.publish_seq
        self.frame_seq = f.frame_seq
        self.capture_ns = f.capture_ns
        self.publish_ns = f.publish_ns
        self.wake_ns = f.wake_ns
        self.read_ns = f.read_ns
        self.writer_epoch = f.writer_epoch
        self.missed = f.missed
        self.width, self.height, self.flags = f.width, f.height, f.flags
        self.latency_us = (f.wake_ns - f.publish_ns) / 1e3
        self.detections = [f.detections[i].as_dict() for i in range(f.ndetections)]
        self.planes = {}
        for i, name in enumerate(PLANE_NAMES):
            if not f.planes & (1 << i):
                continue
            p = f.plane[i]
            raw = ctypes.string_at(f.data[i], p.size)
            if _np is None:
                self.planes[name] = raw
                continue
            bpp = {0: 1, 1: 1, 2: 3, 3: 2}[i]
            dtype = _np.uint16 if i == 3 else _np.uint8
            a = _np.frombuffer(raw, dtype=_np.uint8).reshape(p.height, p.stride)[:, :p.width * bpp]
            a = a.view(dtype) if i == 3 else a
            self.planes[name] = a.reshape(p.height, p.width, 3) if i == 2 else a

    def __repr__(self):
        return "Frame(seq=%d, frame_seq=%d, %dx%d, planes=%s, missed=%d, %d detections)" % (
            self.seq, self.frame_seq, self.width, self.height, list(self.planes), self.missed,
            len(self.detections))


class Event:
    """Not a frame: kind is "writer_gone" or "writer_restarted"."""

    def __init__(self, kind):
        self.kind = kind

    def __repr__(self):
        return "Event(%s)" % self.kind


class Reader:
    """A reader of /maskd.INSTANCE. register=False reads without an entry in the reader table."""

    def __init__(self, instance, register=True, lib=None):
        self._lib = _load(lib)
        self._h = ctypes.c_void_p()
        err = ctypes.create_string_buffer(256)
        opts = _Opts(0, 0 if register else 1)
        rc = self._lib.maskbus_reader_open(instance.encode(), ctypes.byref(opts), ctypes.byref(self._h), err, 256)
        if rc != 0:
            raise MaskbusError(rc, err.value.decode(errors="replace"))
        self._frame = _Frame()

    def next(self, timeout=None):
        """Wait up to timeout seconds (None: forever) for a new frame: a Frame, an Event, or None on timeout."""
        if not self._h:
            raise ValueError("reader is closed")
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        rc = self._lib.maskbus_reader_next(self._h, ms, ctypes.byref(self._frame))
        if rc == _FRAME:
            return Frame(self._frame)
        if rc == _TIMEOUT:
            return None
        if rc == _GONE:
            return Event("writer_gone")
        if rc == _RESTARTED:
            return Event("writer_restarted")
        raise MaskbusError(rc, self._lib.maskbus_reader_error(self._h).decode(errors="replace"))

    def frames(self, timeout=None):
        """Yield frames until a wait exceeds timeout (None: forever); events are skipped."""
        while True:
            x = self.next(timeout)
            if x is None:
                return
            if isinstance(x, Frame):
                yield x

    def status(self):
        st = _Status()
        self._lib.maskbus_reader_status(self._h, ctypes.byref(st))
        return {k: getattr(st, k) for k, _ in st._fields_}

    def close(self):
        if self._h:
            self._lib.maskbus_reader_close(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()
