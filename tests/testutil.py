"""testutil: what the Python integration tests share — failure collection and the shared data folder."""
import os

failures = []


def check(cond, what):
    """Records (and prints) a failure unless cond holds; returns cond."""
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


def finish():
    """The test's exit status: 1 (with the count) if a check failed, else 0."""
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


def data_dir():
    """The shared data folder: $MASKD_TEST_DATA, else ../shared/data beside the source root; None if absent."""
    d = os.environ.get("MASKD_TEST_DATA")
    if not d:
        root = os.environ.get("MASKD_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
        d = os.path.join(root, "..", "shared", "data")
    return d if os.path.isdir(d) else None
