"""The fine-tuning data formats both trainers take, and how a record becomes training text.

`formats` (standard library only, so the platform checks a run's format,
columns and loss with the same declarations) says what a record of each
format holds; `parts` turns it into parts of text, each trained or not;
`records` reads JSON Lines, JSON, CSV, Parquet and text files; `chat`
renders conversations with a chat template (jinja2, as transformers does)
for the trainer that has no tokenizer of transformers' own.
"""
