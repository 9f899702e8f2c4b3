"""A tiny random-weight llama GGUF for tests that need the real llama.cpp path.

Byte-fallback vocabulary (``<0x00>`` … ``<0xFF>`` typed BYTE, SentencePiece
``llama`` tokenizer), two layers, a Qwen-style ChatML chat template with tool
support.  It says nothing meaningful, but it loads in milliseconds, streams,
follows a JSON-schema grammar and embeds, so load/generate/cancel/grammar code
runs for real in CI, with no model download.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# Qwen2.5's template reduced to what our engine relies on: system prompt,
# tool list, <tool_call> blocks, tool results and the generation prompt.
CHATML_TOOLS_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] }}
{%- else %}You are a helpful assistant.{% endif %}

# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

For each function call, return a json object with function name and arguments
within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0]['role'] == 'system' %}<|im_start|>system
{{ messages[0]['content'] }}<|im_end|>
{% endif -%}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'assistant' and not message.tool_calls) %}
{%- if not (loop.first and message.role == 'system') %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- elif message.role == 'assistant' %}<|im_start|>assistant
{% if message.content %}{{ message.content }}{% endif %}
{%- for tool_call in message.tool_calls %}
<tool_call>
{"name": "{{ tool_call.function.name }}", "arguments": {{ tool_call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

N_VOCAB_BYTES = 256


def write_tiny_llama(
    path: Path,
    *,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_ff: int = 128,
    n_ctx_train: int = 2048,
    chat_template: str | None = CHATML_TOOLS_TEMPLATE,
    seed: int = 0,
    name: str = "tiny-random-llama",
) -> Path:
    """Write the model to ``path`` and return it (~0.5 MB with the defaults)."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens: list[bytes] = [b"<unk>", b"<s>", b"</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    for byte in range(N_VOCAB_BYTES):
        tokens.append(f"<0x{byte:02X}>".encode())
        types.append(gguf.TokenType.BYTE)
    n_vocab = len(tokens)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(name)
    writer.add_context_length(n_ctx_train)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    if chat_template is not None:
        writer.add_chat_template(chat_template)

    def tensor(tensor_name: str, *shape: int, scale: float = 0.02) -> None:
        data = (rng.standard_normal(shape) * scale).astype(np.float32)
        writer.add_tensor(tensor_name, data)

    def ones(tensor_name: str, size: int) -> None:
        writer.add_tensor(tensor_name, np.ones(size, dtype=np.float32))

    tensor("token_embd.weight", n_vocab, n_embd)
    ones("output_norm.weight", n_embd)
    tensor("output.weight", n_vocab, n_embd)
    for layer in range(n_layer):
        prefix = f"blk.{layer}"
        ones(f"{prefix}.attn_norm.weight", n_embd)
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"{prefix}.{part}.weight", n_embd, n_embd)
        ones(f"{prefix}.ffn_norm.weight", n_embd)
        tensor(f"{prefix}.ffn_gate.weight", n_ff, n_embd)
        tensor(f"{prefix}.ffn_up.weight", n_ff, n_embd)
        tensor(f"{prefix}.ffn_down.weight", n_embd, n_ff)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
