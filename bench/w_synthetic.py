#!/usr/bin/env python3
"""W-synthetic of ../shared/BENCH.md as a pensieve-bench dataset: N conversations
of T turns, each user message 60 words drawn (seed 7) from a fixed word list,
each assistant reply 4 x MAX_TOKENS characters, so the replay's chars/4 rule
asks for MAX_TOKENS output tokens.

usage: w_synthetic.py OUT.jsonl CONVERSATIONS TURNS MAX_TOKENS"""
import json
import random
import sys

WORDS = ("the a cat dog river mountain quiet bright story window garden city light shadow train morning "
         "evening paper music table friend letter road forest small large old new red green blue tells "
         "about why how where when after before under over between through around").split()


def main():
    path, n, turns, max_tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(7)
    with open(path, "w") as f:
        for c in range(n):
            t = []
            for _ in range(turns):
                t.append({"role": "user", "content": " ".join(rng.choice(WORDS) for _ in range(60))})
                t.append({"role": "assistant", "content": "x" * (4 * max_tokens)})
            f.write(json.dumps({"id": f"w-synthetic-{c}", "turns": t}) + "\n")


if __name__ == "__main__":
    main()
