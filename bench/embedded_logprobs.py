"""Seconds per chat call with log-probabilities on the embedded model, llama-cpp-python's own post-processing
against ``medfuzz.models.llama_server``'s (numpy, the same values), in one process: the same prompts, each
call's prompt new (no prefix reuse), the two variants alternating so that load on the machine hits both alike.
CPU seconds are the robust column on a shared machine.

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
    original = (module.Llama.logits_to_logprobs, getattr(module, "zip", builtins.zip),
                getattr(module, "sorted", builtins.sorted))

    def use(patched: bool) -> None:
        if patched:
            assert llama_server.patch_logprobs(), "this llama-cpp-python is not the version the patch knows"
        else:
            module.Llama.logits_to_logprobs, module.zip, module.sorted = original

    timings: dict[str, list[tuple[float, float]]] = {"llama-cpp-python": [], "medfuzz llama_server": []}
    replies: dict[str, list[object]] = {name: [] for name in timings}
    for call in range(args.calls):
        for name in timings:
            use(name != "llama-cpp-python")
            messages = [{"role": "user", "content": QUESTION.format(age=30 + call)}]
            llm.reset()
            wall, cpu = time.perf_counter(), time.process_time()
            out = llm.create_chat_completion(messages=messages, max_tokens=args.max_tokens, temperature=0.0,
                                             logprobs=True, top_logprobs=5)
            timings[name].append((time.perf_counter() - wall, time.process_time() - cpu))
            replies[name].append(out["choices"][0]["logprobs"])
    use(False)
    same = replies["llama-cpp-python"] == replies["medfuzz llama_server"]
    print(f"{'post-processing':<24} {'calls':>5} {'wall s/call':>12} {'CPU s/call':>11}   (median; "
          f"max_tokens {args.max_tokens}, log-probabilities top 5)")
    for name, rows in timings.items():
        print(f"{name:<24} {len(rows):>5} {statistics.median(r[0] for r in rows):>12.3f} "
              f"{statistics.median(r[1] for r in rows):>11.3f}")
    print(f"identical log-probabilities in every reply: {same}")


if __name__ == "__main__":
    main()
