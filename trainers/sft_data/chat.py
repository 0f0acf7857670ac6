"""Chat templates rendered the way transformers renders them, for a trainer without transformers.

transformers compiles a chat template in jinja2's immutable sandbox with
`trim_blocks`, `lstrip_blocks` and loop controls, and gives it
`raise_exception`, `strftime_now` and a `tojson` that does not escape HTML
(transformers/utils/chat_template_utils.py, `_cached_compile_jinja_template`);
`render` does the same, with `messages`, `add_generation_prompt`,
`bos_token` and `eos_token` as its variables.

Where the template comes from: a `.jinja` file, a Hugging Face model
directory's own (`chat_template.jinja`, or `chat_template` in
`tokenizer_config.json`), or one of the templates shipped here for Gemma's
turn formats (`gemma3`, `gemma4`, `gemma4-31b`; pretrained checkpoints ship
none). The shipped ones render text chats exactly as the templates TRL
ships for those models do (tests/trl_gpu/test_sft_formats.py).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

TEMPLATE_DIR = Path(__file__).with_name("templates")
# Name -> (file, variables it is rendered with).
BUILT_IN = {
    "gemma3": ("gemma3.jinja", {}),
    "gemma4": ("gemma4.jinja", {}),
    "gemma4-31b": ("gemma4.jinja", {"empty_thought_in_prompt": True}),
}
# The shipped template of each model family, by name prefix (gemma4-31b before gemma4-*): what the JAX
# trainer renders a model's chats with when neither --chat_template nor --init_from_hf names another.
FAMILY_TEMPLATES = {"gemma3": "gemma3", "tiny": "gemma3", "gemma4-31b": "gemma4-31b", "gemma4": "gemma4",
                    "tiny-gemma4": "gemma4"}


def family_template(model: str) -> str:
    """The shipped template of a model's family; KeyError for a model of none."""
    for prefix, name in FAMILY_TEMPLATES.items():
        if model == prefix or model.startswith(prefix + "-"):
            return name
    raise KeyError(model)


def template_choice(chat_template: str | None, init_from_hf: str | None, model: str) -> str:
    """The template a model-family trainer (the JAX one) renders chats with: `chat_template` as given, else
    `init_from_hf`'s own where that directory holds one, else the model family's shipped one."""
    if chat_template:
        return chat_template
    if init_from_hf and model_dir_template(init_from_hf):
        return init_from_hf
    return family_template(model)


class TemplateError(Exception):
    """A chat template that can't be found, read or compiled (exit 78)."""


def model_dir_template(path: str | Path) -> str | None:
    """A Hugging Face model directory's chat template, or None."""
    path = Path(path)
    if (path / "chat_template.jinja").is_file():
        return (path / "chat_template.jinja").read_text(encoding="utf-8")
    config = path / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, list):  # named templates: transformers uses "default"
            template = next((t["template"] for t in template if t.get("name") == "default"), None)
        return template or None
    return None


def _raise_exception(message):
    import jinja2  # pylint: disable=g-import-not-at-top

    raise jinja2.exceptions.TemplateError(message)


def _tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class ChatTemplate:
    """One compiled template with the tokenizer's BOS and EOS texts."""

    def __init__(self, source: str, bos_token: str, eos_token: str, variables: dict | None = None,
                 name: str = "chat template"):
        import jinja2  # pylint: disable=g-import-not-at-top
        from jinja2 import ext, sandbox  # pylint: disable=g-import-not-at-top

        env = sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                    extensions=[ext.loopcontrols])
        env.filters["tojson"] = _tojson
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
        try:
            self._template = env.from_string(source)
        except jinja2.exceptions.TemplateSyntaxError as err:
            raise TemplateError(f"{name}: not a jinja template ({err})") from None
        self.name, self.source = name, source
        self.variables = {"bos_token": bos_token, "eos_token": eos_token, **(variables or {})}

    @classmethod
    def named(cls, value: str, bos_token: str, eos_token: str) -> ChatTemplate:
        """A shipped template by name, a .jinja file, or a model directory's template."""
        if value in BUILT_IN:
            file, variables = BUILT_IN[value]
            return cls((TEMPLATE_DIR / file).read_text(encoding="utf-8"), bos_token, eos_token, variables, value)
        path = Path(value)
        if path.is_dir():
            source = model_dir_template(path)
            if source is None:
                raise TemplateError(f"{value}: the directory has no chat template (chat_template.jinja, or "
                                    "chat_template in tokenizer_config.json)")
            return cls(source, bos_token, eos_token, name=value)
        if not path.is_file():
            raise TemplateError(f"{value}: neither a shipped template ({', '.join(BUILT_IN)}) nor a file")
        try:
            return cls(path.read_text(encoding="utf-8"), bos_token, eos_token, name=value)
        except (OSError, UnicodeDecodeError) as err:
            raise TemplateError(f"{value}: cannot read it ({err})") from None

    def render(self, messages: list[dict], add_generation_prompt: bool, tools: list[dict] | None = None) -> str:
        # transformers passes `tools` to every template, None when there are none (apply_chat_template)
        return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt, tools=tools,
                                     **self.variables)
