"""``medfuzz run --shard``: ``K/N`` given by hand, or ``auto`` / ``auto/N``, the index (and count) a cluster
scheduler gives each task of an array:

- Slurm job arrays (``sbatch --array=0-7``): ``SLURM_ARRAY_TASK_ID`` minus ``SLURM_ARRAY_TASK_MIN`` (divided by
  ``SLURM_ARRAY_TASK_STEP`` when the array has a step) is the 0-based index, ``SLURM_ARRAY_TASK_COUNT`` the count;
  the ids must form one range (``0-7``, ``1-8``, ``0-14:2``), since shards are contiguous slices numbered 1..N;
- Kubernetes Indexed Jobs (``completionMode: Indexed``): ``JOB_COMPLETION_INDEX`` is the 0-based index. Kubernetes
  puts no count in the environment, so it comes from ``--shard auto/N`` or ``MEDFUZZ_SHARD_COUNT`` (set it to the
  Job's ``completions``).

The shard is K = index + 1 of N, as ``--shard K/N``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from medfuzz.errors import MedfuzzError

SLURM_ID, SLURM_COUNT = "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"
SLURM_MIN, SLURM_MAX, SLURM_STEP = "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP"
K8S_INDEX = "JOB_COMPLETION_INDEX"
COUNT_VARIABLE = "MEDFUZZ_SHARD_COUNT"
HOW = (f"--shard auto reads a Slurm job array ({SLURM_ID}, {SLURM_COUNT}) or a Kubernetes Indexed Job "
       f"({K8S_INDEX}, with the count as --shard auto/N or {COUNT_VARIABLE})")


@dataclass(frozen=True)
class Shard:
    index: int  # K, 1-based
    count: int  # N
    source: str  # where K and N came from, for the run's first lines

    def as_pair(self) -> tuple[int, int]:
        return self.index, self.count


def parse_shard(text: str | None, environ: Mapping[str, str] | None = None) -> Shard | None:
    """``None`` (no sharding), ``K/N``, ``auto`` or ``auto/N``; ``environ`` defaults to this process's."""
    if text is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if match is not None:
        return Shard(int(match.group(1)), int(match.group(2)), "given")
    match = re.fullmatch(r"\s*auto\s*(?:/\s*(\d+)\s*)?", text)
    if match is None:
        raise MedfuzzError(f"--shard {text!r}: expected K/N (e.g. 2/4, the 2nd of 4 slices of every run's items), "
                           "auto or auto/N (the index from the cluster scheduler)")
    count = int(match.group(1)) if match.group(1) else None
    return from_scheduler(os.environ if environ is None else environ, count)


def _integer(environ: Mapping[str, str], name: str) -> int:
    value = environ[name].strip()
    if not re.fullmatch(r"\d+", value):
        raise MedfuzzError(f"--shard auto: {name}={environ[name]!r} is not a non-negative integer")
    return int(value)


def from_scheduler(environ: Mapping[str, str], count: int | None = None) -> Shard:
    """The shard a Slurm array task or a Kubernetes Indexed Job pod runs; ``count``: N given as ``auto/N``."""
    slurm, k8s = SLURM_ID in environ, K8S_INDEX in environ
    if slurm and k8s:
        raise MedfuzzError(f"--shard auto: both {SLURM_ID} and {K8S_INDEX} are set; give --shard K/N")
    if slurm:
        shard = _from_slurm(environ)
        if count is not None and count != shard.count:
            raise MedfuzzError(f"--shard auto/{count}: the Slurm array has {shard.count} tasks ({SLURM_COUNT})")
        return shard
    if k8s:
        return _from_kubernetes(environ, count)
    raise MedfuzzError(f"--shard auto: no scheduler index in the environment. {HOW}; or give --shard K/N")


def _from_slurm(environ: Mapping[str, str]) -> Shard:
    if SLURM_COUNT not in environ:
        raise MedfuzzError(f"--shard auto: {SLURM_ID} is set but {SLURM_COUNT} is not (Slurm sets both for a job "
                           "array)")
    task, count = _integer(environ, SLURM_ID), _integer(environ, SLURM_COUNT)
    first = _integer(environ, SLURM_MIN) if SLURM_MIN in environ else 0
    step = _integer(environ, SLURM_STEP) if SLURM_STEP in environ else 1
    last = _integer(environ, SLURM_MAX) if SLURM_MAX in environ else first + (count - 1) * step
    offset = task - first
    if step < 1 or last != first + (count - 1) * step or offset < 0 or offset % step or offset // step >= count:
        raise MedfuzzError(f"--shard auto: the Slurm array is not one range of task ids ({SLURM_ID}={task}, "
                           f"{SLURM_MIN}={first}, {SLURM_MAX}={last}, {SLURM_STEP}={step}, {SLURM_COUNT}={count}); "
                           "submit it as --array=0-N (a step is fine; a list such as 1,3,7 is not)")
    index = offset // step
    return Shard(index + 1, count, f"Slurm array task {task} of {first}-{last}" + (f":{step}" if step > 1 else ""))


def _from_kubernetes(environ: Mapping[str, str], count: int | None) -> Shard:
    index = _integer(environ, K8S_INDEX)
    if count is None:
        if COUNT_VARIABLE not in environ:
            raise MedfuzzError(f"--shard auto: {K8S_INDEX}={index} (a Kubernetes Indexed Job) gives no count: use "
                               f"--shard auto/N or set {COUNT_VARIABLE} to the Job's completions")
        count = _integer(environ, COUNT_VARIABLE)
    if not 0 <= index < count:
        raise MedfuzzError(f"--shard auto: {K8S_INDEX}={index} is outside 0..{count - 1} for {count} shards")
    return Shard(index + 1, count, f"Kubernetes Indexed Job completion index {index}")


def shard_pair(text: str | None) -> tuple[int, int] | None:
    """``--shard`` as ``SuitePlan.shard`` takes it, ``(K, N)`` or ``None``; a shard read from a scheduler is said in
    one line, since nothing on the command line shows which slice this process runs."""
    shard = parse_shard(text)
    if shard is None:
        return None
    if shard.source != "given":
        print(f"--shard {text.strip()}: shard {shard.index}/{shard.count} ({shard.source})", flush=True)
    return shard.as_pair()
