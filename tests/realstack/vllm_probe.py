"""Test-only vLLM scheduler classes that log what vLLM itself scheduled, step by step.

vLLM imports a scheduler class by its qualified name (`scheduler_cls`, SchedulerConfig) inside the
engine-core process, so these work whichever process runs the engine (tests/realstack puts this
folder on PYTHONPATH). Each engine step appends one JSON line to $VLLM_PROBE_LOG:
  {"op": "schedule", "t": monotonic s, "tokens": total scheduled, "reqs": requests, "per_req": [...]}
  {"op": "output", "t": monotonic s, "new_tokens": tokens sampled for requests}
"output" is written when the engine core has the step's sampled tokens (update_from_output), the
moment vLLM stamps its EngineCoreOutputs with: its inter_token_latency metric is the difference of
those stamps (vllm/v1/metrics/stats.py), so the differences of "output" times are vLLM's ITL.
Nothing here touches CUDA: the capture path is not instrumented."""
import json
import os
import time

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler


def _log(rec):
    path = os.environ.get("VLLM_PROBE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")


class _Probe:
    def schedule(self, *args, **kwargs):
        out = super().schedule(*args, **kwargs)
        per = sorted(out.num_scheduled_tokens.values())
        _log({"op": "schedule", "t": time.monotonic(), "tokens": out.total_num_scheduled_tokens,
              "reqs": len(per), "per_req": per})
        return out

    def update_from_output(self, scheduler_output, model_runner_output):
        res = super().update_from_output(scheduler_output, model_runner_output)
        new = sum(len(o.new_token_ids) for outs in res.values() for o in outs.outputs)
        _log({"op": "output", "t": time.monotonic(), "new_tokens": new,
              "step_tokens": scheduler_output.total_num_scheduled_tokens})
        return res


class StepLogScheduler(_Probe, Scheduler):
    pass


class AsyncStepLogScheduler(_Probe, AsyncScheduler):
    pass
