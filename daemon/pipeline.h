/* pipeline: maskd's frame pipeline — stages on threads joined by bounded queues that drop the oldest frame when a
 * stage falls behind (latency first), from the capture source to the frame bus:
 *
 *   capture thread   source (mk_source_next) -> a copy of the frame -> capture queue (pipeline.queue_depth); it
 *                    also applies source.controls to the source (mk_source_apply_controls) at its next frame after
 *                    a change and after opening the source afresh
 *   decode feeder    capture queue -> decode pool (mk_decode: MJPEG on pipeline.decode_threads workers, raw frames
 *                    passed through, order kept, corrupt frames counted and skipped)
 *   process thread   decode pool -> its ready queue (pipeline.queue_depth) -> the segmentation engine
 *                    (segment.h: upload -> YUYV to RGB -> detect every detect.every_n frames -> box choice -> cut
 *                    -> guided upsampling and the mask products -> download; pipeline.inflight frames at once,
 *                    results in frame order, identical to one at a time) -> publish on the bus (frame_seq and
 *                    capture_ns of the source frame, the detections, flags KEYFRAME or NO_PERSON)
 * Every pixel operation is a kernels op on the context of the configured backend.
 *
 * The process thread submits frames to the engine while it has a free slot and publishes the results as they
 * come; while frames are in flight and a slot is free it looks for the next frame every POLL_MS.
 * The process thread is also the pipeline's clock: at every frame boundary, and at least every 50 ms (or half
 * bus.heartbeat_ms, when that is less) while no frame comes (idle, source lost), it applies the control server's
 * pending sets (mk_control_apply_pending) and configurations handed over with mk_pipeline_apply(), pings the
 * systemd watchdog, refreshes the bus heartbeat (also after the detector), counts the bus readers, decides idle mode, and once per control.stats_period_ms takes a statistics snapshot,
 * sends the "stats" event and the STATUS= notification.
 *
 * States: starting (until the first frame), running, idle (idle.enable and no live bus reader for
 * idle.timeout_s: the source is closed — a camera's LED goes off — until a reader registers), source-lost (the
 * source vanished or failed: reopened with backoff up to source.retry_max_ms; a file source that ends although
 * source.loop is on counts as lost), ended (a file ended with source.loop off), stopping. Each change is logged
 * and sent as a "state" event.
 *
 * Thread rules: create, start, stop and destroy on the owner's thread. mk_pipeline_get_config, mk_pipeline_stats,
 * mk_pipeline_apply and mk_pipeline_state from any thread; mk_pipeline_commit only on the process thread (it is
 * the control server's set_config, called from mk_control_apply_pending there). The configuration in force is
 * written only by the process thread, under a lock that readers on other threads take. */
#ifndef MK_PIPELINE_H
#define MK_PIPELINE_H

#include "config.h"
#include "control.h"
#include "notify.h"
#include "source.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct cJSON;

typedef struct mk_pipeline mk_pipeline_t;

typedef enum {
    MK_PIPE_STARTING = 0,
    MK_PIPE_RUNNING = 1,
    MK_PIPE_IDLE = 2,
    MK_PIPE_SOURCE_LOST = 3,
    MK_PIPE_ENDED = 4,
    MK_PIPE_STOPPING = 5,
} mk_pipe_state_t;

/* "starting", "running", "idle", "source-lost", "ended", "stopping". */
const char *mk_pipe_state_name(mk_pipe_state_t s);

typedef struct {
    const char *instance;            /* the bus is /maskd.INSTANCE (copied) */
    mk_notify_t *notify;             /* READY=1, STATUS=, WATCHDOG=1 (NULL: none) */
    const mk_v4l2_sys_t *v4l2_sys;   /* V4L2 system calls (NULL: the real ones) */
} mk_pipeline_opts_t;

/* Builds everything the pipeline needs with `cfg` (copied): the compute context of `backend`, the detector when
 * detect.cfg and detect.weights are set, the cut, the decode pool, the queues and the bus writer. No thread runs
 * yet and the source is opened by the capture thread. Errors carry a message (a bad backend, a model that does
 * not load, a bus that cannot be created). */
int mk_pipeline_create(const mk_pipeline_opts_t *opts, const mk_config_t *cfg, mk_pipeline_t **out);
/* The control server whose pending sets the process thread applies and to which events go (NULL: none). Call
 * before start. */
void mk_pipeline_set_control(mk_pipeline_t *p, mk_control_t *control);
/* Starts the threads. */
int mk_pipeline_start(mk_pipeline_t *p);
/* Enters `stopping` and joins the threads (the frame in process is finished and published). Safe twice and on a
 * pipeline never started. */
void mk_pipeline_stop(mk_pipeline_t *p);
/* Stops if needed, closes the bus (readers see the writer gone; the objects stay for a restart) and frees
 * everything. NULL is a no-op. */
void mk_pipeline_destroy(mk_pipeline_t *p);

/* The configuration in force. */
void mk_pipeline_get_config(mk_pipeline_t *p, mk_config_t *out);
/* Process thread only: commits a validated transaction (hooks included). Returns the number of options changed
 * or a negative MK_E* code, then with nothing applied: MK_EINVAL when the transaction sets detect.classes to a
 * class the detector does not have (a name without detect.names, an index beyond the class sets). */
int mk_pipeline_commit(mk_pipeline_t *p, const mk_config_txn_t *txn);
/* Any other thread: hands `txn` to the process thread, which commits it at its next frame boundary, and waits
 * for that (at most timeout_ms). Returns what the commit returned (an error with the commit's message, on the
 * caller's thread); MK_ESTATE ("busy") when the pipeline did not take it in time (then it is never applied). The
 * caller keeps ownership of txn. */
int mk_pipeline_apply(mk_pipeline_t *p, const mk_config_txn_t *txn, int timeout_ms);

mk_pipe_state_t mk_pipeline_state(mk_pipeline_t *p);
/* 1 once the pipeline has failed for good, with the reason in `why` (may be NULL): a frame failed with an error
 * that left the process's GPU context unusable (mk_gpu_lost), so no later frame can succeed in this process. The
 * pipeline then logs it, sends STATUS=failed: ... and raises SIGTERM in the process once; the daemon stops and
 * exits with a failure status, for the service manager to start a fresh process. 0 otherwise. */
int mk_pipeline_failed(mk_pipeline_t *p, char *why, size_t why_len);
/* Frames published so far. */
uint64_t mk_pipeline_published(mk_pipeline_t *p);
/* A new JSON object: state, uptime, backend, source, model, fps per stage, latency percentiles (capture to
 * publish), stage times, frame counters (dropped, corrupt, ...), detections per second, target box, bus readers,
 * configuration changes. NULL on ENOMEM. */
struct cJSON *mk_pipeline_stats(mk_pipeline_t *p);

#ifdef __cplusplus
}
#endif
#endif
