"""The words the claim audit reads, by the kind of fact they claim (earmark.stages.filter.claims).

Each entry maps a regular expression (matched on lowercase text, whole words) to a claim type and its
normalised value. Order matters inside a table: longer phrases first, and a span consumed by one claim is
not read again (so "two speakers" is a speaker count, not also a bare number). Words that name something
no embedded expert can confirm (a place, a named sound source, a genre) are claims all the same: the audit
marks them unsupported, which rejects them where an item must be grounded.
"""

from __future__ import annotations

# Function words a quote neither begins nor ends with: "… leaves from" is cut to "… leaves" (the rule-written
# transcript start), "you have to go to the" to "you have to go" (a run of sure words, evidence.speech.pieces).
EDGE_WORDS = {"a", "an", "the", "to", "of", "from", "in", "on", "at", "and", "or", "but", "with", "for", "my", "your"}


NUMBER_WORDS = {
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
    "twenty": 20,
    "thirty": 30,
    "hundred": 100,
    "single": 1,
    "one": 1,
    "both": 2,
    "couple": 2,
    "pair": 2,
    "several": 3,
    "multiple": 3,
    "many": 4,
    "few": 3,
}

# (pattern, claim type, value). Absence is read separately (a presence word in a NEGATORS scope).
PRESENCE: list[tuple[str, str, str]] = [
    (
        r"silen(?:ce|t)|nothing (?:is )?(?:audible|heard)|"
        r"(?:no|without any) (?:audible )?(?:sounds?(?! (?:events?|effects?|of)\b)|content)|"
        r"empty (?:recording|clip|microphone)|(?:near|almost)[- ]silen\w*|no discernible audio",
        "silence",
        "silent",
    ),
    (
        r"speech|speak\w*|spoken|talk\w*|voices?|vocal(?!s? music)|says?|said|saying|narrat\w*|announc\w*|"
        r"convers\w*|dialogue|monologue|utter\w*|words?|speaker\w*|tells?|explain\w*|"
        r"discuss\w*|read(?:s|ing)? (?:out|aloud)|lectur\w*|interview\w*|whisper\w*|shout\w*|chant\w*",
        "presence",
        "speech",
    ),
    (
        r"music\w*|melod\w*|song\w*|tunes?|chords?|harmon(?:y|ies|ic progression)|instrument\w*|"
        r"playing|plays|played|soundtrack|composition|arpeggio\w*|riffs?|grooves?|jingle\w*|"
        r"(?:musical )?notes?\b",
        "presence",
        "music",
    ),
    (
        r"sound effects?|sound events?|background sounds?|ambient sounds?|noises?|sounds? of|"
        r"(?:other|notable|distinct|separate|environmental|recorded|additional|extra|further) (?:\w+ )?sounds?|events?",
        "presence",
        "sound",
    ),
]
# A negator scopes over the coordinated list after it: "no speech, no music, impulsive sounds, or background
# noise" denies all four (earmark.stages.filter.claims.negated_items). "no one" is read as absence of speech elsewhere.
NEGATORS = (
    r"(?:\b(?:no(?! (?:one|more|less|longer|matter|doubt)\b)|not(?! (?:only|just|necessarily)\b)|without|neither|"
    r"nor|free (?:of|from)|(?:absence|lack) of|devoid of|lacks?|lacking|never|none of(?: the)?)|n['’]t)\b"
    # an instruction's format rule denies words of the answer, not sounds: "do not mention music"
    r"(?! (?:any |the )?(?:use|using|mention\w*|includ\w*|writ\w*|say|saying|repeat\w*|exceed\w*|add|adding|"
    r"answer\w*|respond\w*|reply\w*)\b)"
)
# What ends a negator's scope: a new clause or a contrast ("no speech, but music plays throughout").
SCOPE_END = (
    r"[.;:!?()\[\]—–]|\s-\s|\b(?:but|while|whilst|although|though|whereas|yet|except|apart|besides|instead|rather|"
    r"only|just|so|because|(?<!such )as|since|until|then|however|with|to|which|who|that|what|whether|if|where|when|"
    r"how|why)\b"
)
# A verb closes the list item it is in ("no speech or music is heard"); after a bare comma or "and" it starts
# a new clause ("no speech, and music plays").
SCOPE_VERBS = (
    r"\b(?:is|are|was|were|be|been|being|am|has|have|had|can|could|will|would|may|might|must|should|does|do|did|"
    r"plays?|played|continues?|starts?|begins?|fills?|remains?|appears?|seems?|comes?|enters?|follows?|"
    r"accompan\w+|dominates?|persists?|occurs?|happens?|emerges?|rings?|rises?|fades?)\b"
)
# A list item after a bare comma or "and" that opens like this is a new clause ("no music, a dog barks").
CLAUSE_OPENERS = r"(?:a|an|the|this|these|those|there|it|its|he|she|they|we|you|i|his|her|their|one|some)\b"

# Someone a voice can be speaking to (an individual: an audience or the listener is not a second voice).
_PERSON = (
    r"(?:man|woman|men|women|person|people|friends?|child|children|kids?|boys?|girls?|someone|somebody|another|"
    r"others?|him|them|each other|one another|colleagues?|partners?|companions?|interviewer|host|guests?|"
    r"customers?|students?|caller|baby|mother|father|son|daughter|wife|husband)(?![-'’])|"
    r"her(?= *(?:[,.;!?]|$|and|about|in|on|at|while|as|for|near|before|after|during|over)\b)"  # not "her voice"
)
PEOPLE: list[tuple[str, str, str]] = [
    (r"a man and a woman|a woman and a man|male and female|female and male", "speakers", "2"),
    (
        r"(?:two|2) (?:people|speakers|voices|persons|men|women|males|females)|a conversation between two|"
        r"pair of (?:speakers|voices)|duet|dialogue between",
        "speakers",
        "2",
    ),
    (
        r"(?:three|3) (?:people|speakers|voices)|several (?:people|speakers|voices)|multiple (?:speakers|voices)|"
        r"group of (?:people|speakers)|crowd of (?:people|voices)",
        "speakers",
        "3+",
    ),
    # Another person implied by the wording: a listener who is spoken to, an interlocutor, people talking. Not
    # the recording's own audience ("addresses the listener"), not "conversational" (a style of one voice) and not
    # "one or more people speak" (the rule-written hedge where the count is not sure).
    (
        r"(?:speak|talk|chat|convers|argu|whisper|shout|yell|sing)\w* (?:to|with|at) (?:(?:a|an|the|his|her|their|"
        r"another|some) )?(?:\w+ )?(?:"
        + _PERSON
        + r")|address\w* (?:(?:a|an|the|his|her|another) )?(?:\w+ )?(?:"
        + _PERSON
        + r")|(?:asks?|asked|asking|tells?|told|telling|thanks|thanked|greets?|greeted|interrupts?|interrupted|"
        r"answers?|answered|answering) (?:him|her|them|another|the other|each other|one another)|"
        r"conversations?|conversing|dialog(?:ue)?s?|interview\w*|chatting|chats? with|banter\w*|back[- ]and[- ]forth|"
        r"(?:an? )?exchange (?:between|of (?:words|greetings|views))|each other|one another|take turns|taking turns|"
        r"debat\w*|argument|arguing|discussion (?:between|among|with)|repl(?:ies|ied)|respond(?:s|ed)|in reply|"
        r"(?<!one or more )(?:people|persons|crowd|group|others|adults|children|kids|men|women) (?:\w+ )?(?:talk|"
        r"speak|chat|convers|"
        r"argu|discuss|shout|whisper|murmur|chatter)\w*|(?:talk|speech|chatter|voices|murmur)\w* (?:of|from|among|"
        r"between) (?:\w+ )?(?:people|persons|a crowd|a group|others)|they (?:\w+ )?(?:speak|talk|say|said|discuss|"
        r"convers|chat|argu|ask|answer|repl|respond|laugh|whisper|shout)\w*",
        "speakers",
        "2+",
    ),
    # a bare plural says there is more than one voice ("speech, music, speakers": fresh6's blind check, one voice);
    # not the rule-written hedge "one or more voices" (nor "two voices": a count of its own above)
    (r"(?<!one or more )(?<!or more )(?<!two )(?<!2 )\b(?:speakers|voices|narrators)\b", "speakers", "2+"),
    (
        r"(?:one|single|lone|only one|just one) (?:male |female |adult |young )?(?:speaker|voice|person|narrator)|"
        r"(?:a|one|single|lone|the) (?:speaker|voice|person|narrator)|one (?:man|woman)|"
        r"a single (?:man|woman)|monologue|solo (?:speaker|voice)",
        "speakers",
        "1",
    ),
    (r"\b(?:woman|women|female|lady|ladies|girl|she|her)\b", "gender", "female"),
    (r"\b(?:man|men|male|gentleman|guy|boy|he|his|him)\b", "gender", "male"),
    (r"\b(?:child|children|kid|kids|boy|girl|toddler|baby)\b", "age", "child"),
    (r"\b(?:elderly|old man|old woman|older|aged)\b", "age", "senior"),
]
EMOTION: list[tuple[str, str, str]] = [
    (r"calm\w*|relaxed|soothing|gentle|soft[- ]spoken|measured|steady voice", "emotion", "calm"),
    (r"excit\w*|energetic|enthusiastic|animated|lively|agitated|urgent|emphatic|passionate", "emotion", "animated"),
    (
        r"angr\w*|furious|happy|joyful|cheerful|sad\w*|melanchol\w*|fearful|scared|nervous|anxious|frustrated|"
        r"annoyed|surprised|disgusted|tender|playful|sarcastic|serious|authoritative|friendly|warm tone|cold tone",
        "emotion",
        "named",
    ),
]
LANGUAGE = (
    r"english|spanish|french|german|italian|portuguese|russian|chinese|mandarin|cantonese|japanese|"
    r"korean|arabic|hindi|telugu|tamil|dutch|swedish|polish|turkish|greek|hebrew|latin|catalan|"
    r"romanian|bulgarian|danish|norwegian|finnish|czech|ukrainian|vietnamese|thai|indonesian"
)
INSTRUMENTS = (
    r"piano|keyboards?|guitars?|bass(?: guitar)?|drums?|drum kit|percussion|snare|kick drum|cymbals?|"
    r"hi-hats?|violins?|viola|cello|strings|orchestra\w*|brass|trumpets?|trombones?|horns?|saxophones?|"
    r"sax|flutes?|clarinets?|oboe|harp|organ|synth\w*|accordion|harmonica|ukulele|banjo|mandolin|"
    r"xylophone|marimba|choir|choral|vocals|singer|singing|sung|rapp\w*|beatbox\w*|"
    r"electric guitar|acoustic guitar|pads?"
)
GENRES = (
    r"rock|jazz|blues|classical|electronic|electronica|techno|house music|dance music|pop|hip[- ]hop|rap|"
    r"r&b|soul|funk|reggae|country|folk|metal|punk|ambient|orchestral|cinematic|film score|chiptune|"
    r"8-bit|lo-fi|disco|trance|dubstep|edm|gospel|opera|baroque|latin|world music|new age|ska|"
    r"video game music|game music|symphon\w*|concerto|sonata"
)
MOODS = (
    r"upbeat|cheerful|happy|joyful|sad|melanchol\w*|dark|ominous|tense|suspenseful|dramatic|epic|"
    r"mysterious|eerie|romantic|peaceful|serene|relaxing|chill|mellow|dreamy|uplifting|triumphant|"
    r"aggressive|intense|playful|whimsical|somber|nostalgic|meditative|hypnotic|festive|heroic|"
    r"joy|joyous|jubilant|accomplish\w*|sorrow\w*|longing"
)
TEMPO: list[tuple[str, str, str]] = [  # musical tempo only: "fast speech" or "talks quickly" is not a tempo claim
    (r"(\d{2,3})\s*(?:bpm|beats per minute)", "tempo", "bpm"),
    (
        r"(?:very )?(?:fast|quick|rapid|brisk|high)[- ](?:tempo|beat|rhythm)|up-?tempo|fast[- ]paced (?:music|beat|track)|"
        r"(?:fast|quick|rapid|energetic) (?:music|track|song|melody)",
        "tempo",
        "fast",
    ),
    (
        r"(?:very )?(?:slow|leisurely|languid|low)[- ](?:tempo|beat|rhythm)|down-?tempo|(?:slow|languid) "
        r"(?:music|track|song|melody)",
        "tempo",
        "slow",
    ),
    (r"(?:moderate|medium|mid)[- ]?tempo|(?:moderate|medium)[- ]paced (?:music|beat|track)", "tempo", "moderate"),
]
# How pitch, loudness or tempo move over the clip: no embedded expert reports a trajectory (levels and tempo are
# one number per clip), so such a claim is unsupported; it is specific, so it rejects a grounded item.
CHANGES: list[tuple[str, str, str]] = [
    (
        r"(?:pitch|volume|loudness|tempo|intensity|frequency|tone) (?:of [a-z ]{1,30})?"
        r"(?:rises|rising|increases|increasing|decreases|decreasing|drops|dropping|falls|falling|goes up|goes down|"
        r"changes|changing|shifts|shifting|varies|varying|fluctuates|fluctuating|swells|swelling)|"
        r"(?:gets|grows|becomes|getting|growing|becoming) (?:progressively |gradually |increasingly )?"
        r"(?:louder|quieter|softer|faster|slower|higher|lower|more intense)|"
        r"fades? (?:in|out|away)|fading (?:in|out|away)|crescendo\w*|decrescendo|diminuendo|"
        r"builds? (?:up|to a)|building (?:up|to a)|(?:rising|falling|ascending|descending) (?:pitch|tone|melody)|"
        r"pitch (?:shift|bend)\w*|(?:rises?|rising|increases?|increasing) and (?:then )?"
        r"(?:falls?|falling|decreases?|decreasing|drops?|dropping)",
        "change",
        "over time",
    )
]
# A pitch or timbre level ("a high-pitched tone", "the pitch is low", "the timbre is low"): the evidence a prompt gets has no pitch fact, so the
# claim is unsupported (specific) whatever it says.
PITCH: list[tuple[str, str, str]] = [
    (
        r"(?:high|low|deep|medium|mid)[- ]pitch(?:ed)?|(?:slightly |very |relatively |fairly )?"
        r"(?:high|low|higher|lower|deep) pitch|pitch (?:is|sounds|remains|stays|was|seems) (?:\w+ ){0,2}?"
        r"(?:high|low|higher|lower|deep|constant|steady|stable)|pitch (?:of [a-z ]{1,30})?is (?:slightly |much )?"
        r"(?:higher|lower) than|(?:primary|main|dominant|predominant|overall|average|fundamental|base|central) pitch|"
        # a pitch denied is a pitch level all the same: "a steady beat with no pitch", "an unpitched thud"
        r"pitchless|unpitched|non-pitched|atonal\w*|(?:no|without(?: a| any)?|lacks?(?: a| any)?|lacking(?: a| any)?) "
        r"(?:clear |definite |discernible |distinct |real |recognisable |recognizable )?(?:pitch|tonality)|"
        # a timbre level: "the timbre is low" (no expert measures timbre; said of a silent clip in the dev build)
        r"timbre (?:is|sounds|remains|seems|was) (?:\w+ ){0,2}?(?:high|low|deep|bright|dark|warm|thin|rich|harsh|"
        r"smooth|mellow|sharp|soft)",
        "pitch",
        "level",
    )
]
KEY = r"\b([a-g](?:#|♯|b|♭| sharp| flat)?) (major|minor)\b"
BEAT = r"steady beat|clear beat|regular beat|strong beat|rhythmic|pulse|groove|beat"

# Named sources of sound events (no offline expert names them: unsupported unless a tagger label says so).
EVENTS = (
    r"dogs?|barks?|barking|cats?|meow\w*|birds?|chirp\w*|tweet\w*|rooster|horses?|cows?|insects?|crickets?|"
    r"footsteps?|steps|walking|running|doors?|slam\w*|jingling keys|typing|keyboard clicks|"
    r"cars?|vehicles?|engines?|traffic|trucks?|motorcycles?|trains?|planes?|aircraft|helicopters?|sirens?|"
    r"horns? honk\w*|honk\w*|rain\w*|thunder\w*|wind\w*|water|waves?|stream|river|splash\w*|drip\w*|"
    r"fire|crackl\w*|explosions?|gunshots?|guns?|fireworks?|applause|clapp\w*|cheer\w*|laugh\w*|crowd|"
    r"baby cry\w*|cry|cries|crying|cough\w*|sneez\w*|breath\w*|"
    # non-speech vocal sounds ("sighing" once stood for a jet's roar in a kept caption)
    r"sigh|sighs|sighed|sighing|gasp\w*|groan\w*|moan\w*|scream\w*|shriek\w*|sobb\w*|snor\w*|yawn\w*|hiccup\w*|grunt\w*|"
    r"whimper\w*|phones? ring\w*|ringtone|alarms?|bell rings?|"
    r"doorbell|clock tick\w*|ticking|glass\w*|dishes|cutlery|kettle|microwave|vacuum|"
    r"machines?|machinery|drills?|hammer\w*|tools?|fans?|air conditioning|buzz\w*|whistles?"
)
# Acoustic descriptors the coarse sound tags can confirm (impulsive / tonal / noise-like).
DESCRIPTORS: list[tuple[str, str, str]] = [
    (
        r"clicks?|clicking|knock\w*|taps?|tapping|thuds?|bangs?|thumps?|clatter\w*|impacts?|hits?|pops?|snaps?|"
        r"impulsive|percussive sounds?|short sharp sounds?|sharp onsets?",
        "descriptor",
        "impulsive sound",
    ),
    (
        r"beeps?|beeping|electronic tones?|steady tones?|pure tones?|sine tones?|warning tones?|hum\w*|whines?|"
        r"dings?|chimes?|chiming|pings?|blips?|bleeps?|electronic (?:sounds?|signals?)|tonal sounds?|alert sounds?",
        "descriptor",
        "tonal sound",
    ),
    (r"hiss\w*|rumbl\w*|whoosh\w*|static|noise-like|rushing|roar\w*", "descriptor", "noise"),
]
LOUDNESS: list[tuple[str, str, str]] = [
    (
        r"very (?:quiet|soft|faint|low)|barely audible|faint\w*|quiet\w*|soft(?:ly)?|low[- ](?:volume|level)|hushed",
        "loudness",
        "quiet",
    ),
    (r"very loud|loud(?:ly|er|est)?|booming|blaring|high[- ](?:volume|level)", "loudness", "loud"),
]
RECORDING: list[tuple[str, str, str]] = [  # order matters: "little background noise" is clean, not noisy
    (r"clean|clear recording|noise-free|(?:no|little|minimal|low) background noise|pristine|crisp", "noise", "clean"),
    (
        r"background noise|noisy|noise floor|interference|static noise|hiss|hum|buzz|crackle|poor signal",
        "noise",
        "noisy",
    ),
    (
        r"\bdry\b|close[- ]miked|close microphone|little (?:echo|reverb\w*)|no (?:echo|reverb\w*)|dead room|anechoic",
        "reverb",
        "dry",
    ),
    (r"echo\w*|reverb\w*|reverberant|cavernous|large hall|hall-like|boomy|spacious", "reverb", "reverberant"),
    (
        r"telephone|phone line|narrow[- ]?band\w*|muffled|tinny|lo-fi|low fidelity|band[- ]limited|radio-like",
        "bandwidth",
        "narrow",
    ),
    (r"full[- ]range|wide[- ]?band|hi-fi|high fidelity|full bandwidth", "bandwidth", "full"),
    (r"clipp\w*|overdriven|saturated|distort\w*", "clipping", "clipped"),
    (
        r"(?:poor|low|bad|degraded|compromised)(?: audio| recording| sound| speech)? quality|low-quality|poor-quality|"
        r"artifacts?|artefacts?|glitch\w*|dropouts?|compression artifacts|"
        r"quality (?:(?:of|in) [a-z ]{1,30})?(?:is|was|seems|sounds) (?:very |quite |rather |fairly )?(?:poor|bad|low|degraded)",
        "quality",
        "poor",
    ),
    (
        r"(?:high|good|excellent|studio)(?: audio| recording| sound| speech)? quality|high-quality|good-quality|"
        r"professional(?:ly)? record\w*|well recorded|"
        r"quality (?:(?:of|in) [a-z ]{1,30})?(?:is|was|seems|sounds) (?:very |quite |really )?(?:excellent|good|great|high)",
        "quality",
        "good",
    ),
]
PLACES = (
    r"kitchen|office|street|road|highway|park|forest|woods|beach|ocean|sea|lake|mountain|farm|field|garden|"
    r"studio|church|cathedral|temple|stadium|arena|concert hall|theat(?:er|re)|classroom|school|library|"
    r"hospital|restaurant|caf[eé]|bar|pub|shop|store|market|mall|airport|station|subway|bus|car interior|"
    r"bedroom|living room|bathroom|hallway|corridor|warehouse|factory|construction site|city|urban|"
    r"countryside|village|indoors?|outdoors?|outside|inside|open[- ]air|in a room|small room|large room|"
    r"auditorium|gym|pool|cave|tunnel|bridge|podcast|radio show|broadcast|news report|newscast|lecture hall|"
    r"meeting|phone call|video game|game|movie|film|commercial|advertisement|tutorial|documentary"
)
TIMES = (
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|morning|afternoon|evening|night\w*|"
    r"midnight|dawn|dusk|weekend|holiday|christmas|summer|winter|spring|autumn|yesterday|tomorrow|today|"
    r"\d{4}s?|decade|century|birthday|party|wedding|festival|ceremony|celebration"
)
NUMBER = r"\b\d+(?:[.,]\d+)?\b|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|hundred)\b"
# The named event classes a caption may claim are data: each row of prompts/evidence.toml [events] has its `claim`
# words (earmark.stages.facts.events), read in the registry's order after KEY and before the genres.

# Where in the clip something is heard (evidence.toml [when]'s keys): read after the presence words and the event
# classes, and attached to the nearest content or event claim before it in its sentence (after it where none is
# before: "Throughout the clip, music plays"); the audit compares the region with the one the renderer computes
# from the same facts (earmark.stages.facts.render.when_region). Longer phrases first: "throughout the first part"
# is the first part, not throughout.
_OF_CLIP = r"(?: of (?:the|this) (?:clip|recording|audio|track|excerpt|sample))?"
WHEN: list[tuple[str, str, str]] = [
    (
        r"(?:in|through(?:out)?|during|for|over|across) the (?:first|early|earlier|opening|initial) (?:part|half|"
        r"portion|section|stretch|seconds)" + _OF_CLIP,
        "when",
        "early",
    ),
    (
        r"(?:in|through(?:out)?|during|for|over|across) the (?:later|latter|second|last|final|closing) (?:part|half|"
        r"portion|section|stretch|seconds)" + _OF_CLIP,
        "when",
        "late",
    ),
    (r"(?:for|during|through(?:out)?) (?:most|much) of the (?:clip|recording|audio|track|time)", "when", "most"),
    (
        r"throughout(?: the (?:whole |entire )?(?:clip|recording|audio|track|excerpt))?|(?:for|during|across|"
        r"through) the (?:whole|entire) (?:clip|recording|audio|track|time)|from (?:the )?(?:start|beginning) to "
        r"(?:the )?(?:end|finish)|all the way through",
        "when",
        "throughout",
    ),
    (r"(?:near|at|towards?) the (?:very )?(?:start|beginning|opening)" + _OF_CLIP, "when", "start"),
    (r"(?:near|at|towards?) the (?:very )?end" + _OF_CLIP, "when", "end"),
    (r"in the middle" + _OF_CLIP + r"|midway(?: through)?" + _OF_CLIP, "when", "middle"),
    (
        r"at several (?:moments|points|times)|at (?:various|different|multiple) (?:moments|points|times)|"
        r"(?:several|multiple) times|intermittently|now and (?:then|again)|on and off",
        "when",
        "several",
    ),
]

# How many separate times a named event is heard, attached to the event claimed just before it in its clause:
# "at two separate moments" counts the tagger's runs of windows (judged exactly: earmark.stages.facts.render.
# occurrences); "twice" / "three times" count the sounds themselves, which a 2 s window cannot (two barks in one
# window are one run): only a count below the runs heard is found wrong. Read before WHEN ("several times").
COUNT_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "twice": 2, "thrice": 3}
COUNT: list[tuple[str, str, str]] = [
    (r"at (?:two|three|four|five) (?:separate|different|distinct) (?:moments|times|points)", "count", "moments"),
    (r"twice|thrice|(?:two|three|four|five) times", "count", "times"),
]
# The order of two named events of one sentence, read in the words between them: "a dog barks, then a car
# passes", "a bell rings before the door opens" (the first named is first); "a car passes after a dog barks", or
# "After a dog barks, a car passes" (the one named after "after" is first).
ORDER_THEN = r"then|followed by|before|after which|afterwards?|later"
ORDER_AFTER = r"after"

# A moment in the clip: "at about 2 s", "at 3.5 seconds" (judged against the time spans of the facts; with the
# event claimed just before it, against that event's spans).
MOMENT = r"(?:at|around|about|after|from) (?:about |around |roughly )?(\d{1,3}(?:\.\d)?) ?(?:s|sec|secs|seconds?)\b"
# A stretch of the clip: "between 2 and 4 s", "from 2 s to 4 seconds" (read before MOMENT; its value "2-4": heard
# somewhere inside it). Events are found per 2 s window, so the rule writer names the window, not its start.
SPAN = (
    r"(?:between|from) (?:about |around |roughly )?(\d{1,3}(?:\.\d)?)(?: ?(?:s|sec|secs|seconds?))? (?:and|to) "
    r"(\d{1,3}(?:\.\d)?) ?(?:s|sec|secs|seconds?)\b"
)

# What only a picture shows: video resolution and quality, colours, what is seen or on screen. No audio supports
# such a claim, so QC's `visual_claim` rejects an item that makes one, unless the transcript says those very words
# (earmark.stages.filter.wording). Noise colours ("white noise"), a blue note and a video game's music are audio.
VISUAL = (
    r"(?:video|image|screen|display|picture|pixel|hd|[48]k|\d{3,4}p) resolution|resolution of \d+|\d{3,4}p|"
    r"[48]k(?! ?(?:hz|bps|b)\b)|(?:full |ultra )?hd(?! (?:voice|audio|radio|sound))|uhd|high[- ]definition|"
    r"pixels?|pixelated|frame rate|frames per second|fps|aspect ratio|widescreen|footage|on[- ]?screen|on camera|"
    r"camera (?:angles?|shots?|view|work|pans?|zooms?|shows?|moves?|operator)|in (?:full )?colou?r|"
    r"(?:video|image|picture|scene|footage) (?:shows?|depicts?|displays?)|we see|you can see|can be seen|seen|"
    r"visible|visibly|invisible|shown|visual\w*|"
    r"(?:red|orange|yellow|green|blue|purple|violet|pink|brown|gr[ae]y|black|white)(?! (?:noise|notes?|metal)\b)"
)
# Kinship and social ties between people: only the speech can say them. QC's `unsaid_person` keeps such a word
# only where the clip's transcript says the same word ("my brother, Marta" supports "brother", not "husband").
RELATIONS = (
    r"husbands?|wi(?:fe|ves)|spouses?|fianc[eé]{1,2}s?|boyfriends?|girlfriends?|brothers?|sisters?|siblings?|"
    r"mothers?|fathers?|moms?|mums?|mommy|mummy|dads?|daddy|parents?|sons?|daughters?|step(?:mother|father|son|"
    r"daughter)s?|grand(?:mother|father|ma|pa|son|daughter|child|children|parent)s?|grann(?:y|ies)|aunts?|uncles?|"
    r"cousins?|nephews?|nieces?|in-laws?|friends?|buddy|buddies|partners?|boss(?:es)?(?! (?:battle|fight|level|"
    r"stage|theme|music)\b)|co-?workers?|colleagues?|neighbou?rs?|roommates?|flatmates?|classmates?"
)
# Words the English word list QC reads (pyspellchecker's) lacks: words, not cut-off ones
# (earmark.stages.filter.wording.check_cut_word). Add here what a false `cut_word` rejection names.
WORDS = (
    # the phrase files and the expert labels
    "narrowband wideband untranscribed chiptune chiptunes ringtone ringtones unpitched pitchless overdriven boomy "
    "hoofbeats boing boings boinging bovinae tock tocks "
    # what a caption of sound, music or a recording says in words of the trade
    "soundscape soundscapes synth synths synthy synthwave synthpop dubstep electronica edm idm dnb lofi chillhop "
    "breakbeat breakbeats bassline basslines hihat hihats ostinato arpeggiator sidechain sidechained bitcrushed "
    "lowpass highpass bandpass phaser flanger wah polyrhythmic microtonal timbral echoey echoy bassy hissy folky "
    "acapella cappella beatboxing beatboxed autotune autotuned vocoder asmr sfx foley voicemail subwoofer "
    "livestream vlog vlogger gameplay cutscene cutscenes "
    # units, abbreviations and video words (the visual check names the latter)
    "bpm lufs dbfs snr etc approx fps hd uhd widescreen pixelated lo fi hi"
).split()
