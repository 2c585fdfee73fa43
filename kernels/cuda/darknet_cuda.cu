/* darknet_cuda: the CUDA forward pass of a Darknet network. Not implemented yet: loading on a CUDA context works
 * (nothing is prepared) and a forward pass fails with MK_EUNSUPPORTED, so callers can fall back to the CPU. */
#include "backend.h"
#include "darknet_internal.h"
#include "errors.h"

extern "C" int mk_net_prepare_cuda(mk_ctx_t *ctx, mk_net_t *net)
{
    (void)ctx;
    (void)net;
    return 0;
}

extern "C" int mk_net_forward_cuda(mk_ctx_t *ctx, mk_net_t *net, const mk_image_t *input)
{
    (void)ctx;
    (void)input;
    return mk_err_set(MK_EUNSUPPORTED, "%s: the CUDA forward pass is not implemented yet (use --backend cpu)",
                      net->cfg_name);
}

extern "C" void mk_net_release_cuda(mk_ctx_t *ctx, mk_net_t *net)
{
    (void)ctx;
    (void)net;
}
