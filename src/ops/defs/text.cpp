// String ops: StringNormalizer and TfIdfVectorizer.
#include "ops/op_def.h"

namespace ingot {

INGOT_OP(StringNormalizer)
    .versions(10)
    .inputs(1)
    .attr("case_change_action", "NONE")
    .attr("is_case_sensitive", 0)
    .attr("locale", "")
    .optional_attr("stopwords", AttrKind::Strings)
    .summary(
        "Removes stopwords from a [C] or [1, C] string tensor and changes case (LOWER/UPPER/NONE; ASCII "
        "letters, en_US locale).");
INGOT_OP(TfIdfVectorizer)
    .no_gradient("its input is token ids")
    .versions(9)
    .inputs(1)
    .required_attr("max_gram_length", AttrKind::Int)
    .required_attr("max_skip_count", AttrKind::Int)
    .required_attr("min_gram_length", AttrKind::Int)
    .required_attr("mode", AttrKind::String)
    .required_attr("ngram_counts", AttrKind::Ints)
    .required_attr("ngram_indexes", AttrKind::Ints)
    .optional_attr("pool_int64s", AttrKind::Ints)
    .optional_attr("pool_strings", AttrKind::Strings)
    .optional_attr("weights", AttrKind::Floats)
    .summary(
        "Counts the pool's n-grams (with skips) in each row of a [C] or [N, C] int32/int64/string input; "
        "mode TF, IDF or TFIDF; float32 output [.., max(ngram_indexes) + 1].");

}  // namespace ingot
