/* CUPTI's two "this process's tool" entry points, interposed so that a tool the program brings
 * (torch.profiler's Kineto, nsys) gets CUPTI whole even though the shim took it at capture start:
 * the shim yields it (gpu/activity.c, tkp_cupti_yield: tier 1 goes on, one warning, GPU_INFO
 * status 3) and the call goes on to the real CUPTI unchanged, its result returned as is. Under
 * libcupti's version node (tokprof.map), which is what programs linked to it ask for. Not a hot
 * path: a profiler calls these once per profile. */
#include <cupti.h>

#include "core/base.h"
#include "gpu/activity.h"

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*register_fn)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc);

TKP_EXPORT CUptiResult tkp13_cuptiSubscribe(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn,
                                            void *user)
{
    subscribe_fn real = (subscribe_fn)tkp_cupti_yield("cuptiSubscribe");
    return real ? real(sub, fn, user) : CUPTI_ERROR_NOT_INITIALIZED;
}
__asm__(".symver tkp13_cuptiSubscribe, cuptiSubscribe@@libcupti.so.13");

TKP_EXPORT CUptiResult tkp13_cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc req,
                                                            CUpti_BuffersCallbackCompleteFunc done)
{
    register_fn real = (register_fn)tkp_cupti_yield("cuptiActivityRegisterCallbacks");
    return real ? real(req, done) : CUPTI_ERROR_NOT_INITIALIZED;
}
__asm__(".symver tkp13_cuptiActivityRegisterCallbacks, cuptiActivityRegisterCallbacks@@libcupti.so.13");
