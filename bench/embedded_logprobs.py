"""Seconds per chat call on the embedded model (loaded with ``logits_all``, as its server), with and without
log-probabilities: llama-cpp-python as shipped against ``medfuzz.models.llama_server``'s patches (log-probabilities
by numpy, the prompt's logits only where a reply reads them; the same replies), in one process: the same
prompts, each call's prompt new (no prefix reuse), the variants alternating so that load on the machine hits
both alike. CPU seconds are the robust column on a shared machine.

    python bench/embedded_logprobs.py [--calls 8] [--max-tokens 12]
"""

from __future__ import annotations

import argparse
import builtins
import statistics
import time

from medfuzz.models.local import apply_openmp_defaults, default_threads, embedded_gguf

QUESTION = ("A {age}-year-old woman presents with fatigue, weight gain and cold intolerance for 6 months. Her "
            "pulse is 54/min and her skin is dry. Serum TSH is elevated. Which of the following is the most likely "
            "diagnosis?\nA. Hypothyroidism\nB. Hyperthyroidism\nC. Iron deficiency anemia\nD. Major depressive "
            "disorder\nAnswer with the letter and the option.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=8, help="calls per variant (default 8)")
    parser.add_argument("--max-tokens", type=int, default=12)
    args = parser.parse_args()
    apply_openmp_defaults()
    import llama_cpp.llama as module
    from llama_cpp import Llama

    from medfuzz.models import llama_server

    llm = Llama(model_path=str(embedded_gguf()), n_ctx=4096, n_threads=default_threads(),
                n_threads_batch=default_threads(), logits_all=True, verbose=False)
    names = ("logits_to_logprobs", "eval", "_create_completion")
    original = ({name: module.Llama.__dict__[name] for name in names}, getattr(module, "zip", builtins.zip),
                getattr(module, "sorted", builtins.sorted))

    def use(patched: bool) -> None:
        for name, method in original[0].items():
            setattr(module.Llama, name, method)
        module.zip, module.sorted = original[1], original[2]
        llama_server.ORIGINAL.clear()
        if patched:
            assert llama_server.patch_logprobs() and llama_server.patch_prompt_rows(), \
                "this llama-cpp-python is not the version the patches know"

    variants = [(name, logprobs) for logprobs in (True, False) for name in ("llama-cpp-python", "medfuzz llama_server")]
    timings: dict[tuple[str, bool], list[tuple[float, float]]] = {v: [] for v in variants}
    replies: dict[tuple[str, bool], list[object]] = {v: [] for v in variants}
    for call in range(args.calls):
        for name, logprobs in variants:
            use(name != "llama-cpp-python")
            messages = [{"role": "user", "content": QUESTION.format(age=30 + call)}]
            llm.reset()
            wall, cpu = time.perf_counter(), time.process_time()
            out = llm.create_chat_completion(messages=messages, max_tokens=args.max_tokens, temperature=0.0,
                                             logprobs=logprobs, top_logprobs=5 if logprobs else None)
            timings[name, logprobs].append((time.perf_counter() - wall, time.process_time() - cpu))
            replies[name, logprobs].append(out["choices"])
    use(False)
    print(f"{'server code':<24} {'call':<22} {'calls':>5} {'wall s/call':>12} {'CPU s/call':>11}   (median; "
          f"max_tokens {args.max_tokens})")
    for (name, logprobs), rows in timings.items():
        call = "log-probabilities top 5" if logprobs else "text only"
        print(f"{name:<24} {call:<22} {len(rows):>5} {statistics.median(r[0] for r in rows):>12.3f} "
              f"{statistics.median(r[1] for r in rows):>11.3f}")
    same = all(replies["llama-cpp-python", lp] == replies["medfuzz llama_server", lp] for lp in (True, False))
    print(f"identical replies (text and log-probabilities): {same}")


if __name__ == "__main__":
    main()
