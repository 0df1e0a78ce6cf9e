"""llama-cpp-python's OpenAI-compatible server, with our llama.cpp loading fix applied.

    python -m lc_pipeline.generate.llamacpp_server --model path/to/model.gguf --port 8000

Takes the same arguments as ``python -m llama_cpp.server``; the only difference is that the
weights go into plain CPU buffers (see ``prompting.disable_llamacpp_extra_buffer_types``),
which avoids a crash of llama-cpp-python 0.3.36 on CPUs with AMX.
"""

from __future__ import annotations

from lc_pipeline.generate.prompting import disable_llamacpp_extra_buffer_types


def main() -> None:
    disable_llamacpp_extra_buffer_types()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
