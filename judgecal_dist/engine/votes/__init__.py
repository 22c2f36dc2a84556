"""The one vote codec: verdict rows to item x judge codes (:mod:`.codec`), and its Spark tasks (:mod:`.spark`).

Only the codec is imported here: it needs no Spark, so Spark's Python workers and the in-memory engine load it
alone; import :mod:`judgecal_dist.engine.votes.spark` for the Spark paths.
"""

from judgecal_dist.engine.votes.codec import (
    ITEM_KEYS,
    JUDGES_PER_BLOCK,
    MAX_VERDICT_PATTERN_JUDGES,
    VERDICT_COLUMNS,
    CodedRows,
    ItemVotes,
    LabelIndex,
    as_dictionary,
    binary_codes,
    block_columns,
    category_codes,
    codes_of,
    encode,
    from_binary_column,
    item_votes,
    outcome_signs,
    pack,
    to_binary_column,
    unpack,
    verdict_patterns,
    verdicts_of_signs,
    vote_pattern_digits,
    vote_pattern_votes,
)

__all__ = [
    "ITEM_KEYS",
    "JUDGES_PER_BLOCK",
    "MAX_VERDICT_PATTERN_JUDGES",
    "VERDICT_COLUMNS",
    "CodedRows",
    "ItemVotes",
    "LabelIndex",
    "as_dictionary",
    "binary_codes",
    "block_columns",
    "category_codes",
    "codes_of",
    "encode",
    "from_binary_column",
    "item_votes",
    "outcome_signs",
    "pack",
    "to_binary_column",
    "unpack",
    "verdict_patterns",
    "verdicts_of_signs",
    "vote_pattern_digits",
    "vote_pattern_votes",
]
