"""What every stage says about a clip's facts, in one vocabulary: measurement bands (`bands`), the words the
evidence renderer puts into prompts (`render`), the claim vocabulary the audit reads items with
(`claim_vocab`) and text normalisation (`text`)."""
