"""A model directory's chat template: the Jinja text that turns a list of messages ({"role", "content"}) into the
one prompt a decoder reads, rendered as transformers' apply_chat_template renders it (tokenize=False).

The template is the directory's chat_template.jinja, else tokenizer_config.json's `chat_template` (a text, or a
list of named templates: the one named "default"). Templates come from the hub with the weights, so they are
untrusted code: they run in Jinja's ImmutableSandboxedEnvironment, with transformers' settings (trim_blocks,
lstrip_blocks, the loop controls) and helpers (raise_exception, tojson, strftime_now); the special tokens of
tokenizer_config.json (eos_token, ...) are variables, as transformers passes them.

    template = ChatTemplate.read(directory)        # None without one
    template.render([{"role": "query", "content": "what is numpy?"}, {"role": "document", "content": "..."}])
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

TEMPLATE_FILE = "chat_template.jinja"
Message = Mapping[str, str]


@functools.lru_cache(maxsize=16)
def compiled(source: str) -> Any:
    """The template compiled in a sandbox, as transformers' _compile_jinja_template compiles it."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys=False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    environment.filters["tojson"] = tojson
    environment.globals["raise_exception"] = raise_exception
    environment.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return environment.from_string(source)


@dataclass(frozen=True)
class ChatTemplate:
    """A chat template's text, where it was read from and the special tokens it sees."""

    source: str
    origin: str  # the file it was read from, for errors
    tokens: Mapping[str, str] = field(default_factory=dict)  # eos_token, pad_token, ... as template variables

    @classmethod
    def read(cls, directory: str | Path) -> ChatTemplate | None:
        """The directory's chat template (chat_template.jinja, else tokenizer_config.json's), or None."""
        directory = Path(directory)
        config_file, template_file = directory / "tokenizer_config.json", directory / TEMPLATE_FILE
        try:
            config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
            template = template_file.read_text(encoding="utf-8") if template_file.is_file() else None
        except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
            raise ValueError(f"{directory}: its chat template cannot be read: {type(e).__name__}: {e}") from None
        config = config if isinstance(config, dict) else {}
        tokens = {}
        for key, value in config.items():
            value = value.get("content") if isinstance(value, dict) else value
            if key.endswith("_token") and isinstance(value, str):
                tokens[key] = value
        if template is not None:
            return cls(template, str(template_file), tokens)
        source = config.get("chat_template")
        if isinstance(source, list):  # named templates: [{"name", "template"}]
            named = {t.get("name"): t.get("template") for t in source if isinstance(t, dict)}
            source = named.get("default")
        if source is None:
            return None
        if not isinstance(source, str):
            raise ValueError(f"{config_file}: chat_template must be a text or a list of named templates")
        return cls(source, f"{config_file} (chat_template)", tokens)

    def render(self, messages: Sequence[Message]) -> str:
        """The prompt of `messages`, as apply_chat_template(messages, tokenize=False) (no generation prompt
        added); a ValueError naming the template when it fails."""
        try:
            template = compiled(self.source)
            return template.render(
                messages=[dict(m) for m in messages],
                tools=None,
                documents=None,
                add_generation_prompt=False,
                **self.tokens,
            )
        except Exception as e:  # a template error, a sandbox refusal: the template's fault, named
            raise ValueError(f"{self.origin}: the chat template failed: {type(e).__name__}: {e}") from None

    def carries(self, roles: Sequence[str]) -> bool:
        """Whether each of `roles` reaches the prompt: a message of that role with other content changes the render
        (as sentence-transformers probes a template for a pair's query and document roles)."""
        base = [{"role": role, "content": f"probe {role}"} for role in roles]
        try:
            first = self.render(base)
            for i in range(len(roles)):
                varied = [dict(m, content="other") if j == i else m for j, m in enumerate(base)]
                if self.render(varied) == first:
                    return False
        except ValueError:
            return False
        return True
