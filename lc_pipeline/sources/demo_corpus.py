"""A deterministic fictional encyclopedia: the embedded offline corpus.

The facts are invented, so no model can answer from memory: a correct answer shows that
the model read the context. Entities (people, places, organisations, works) are linked by
relations (birthplace, employer, founder, headquarters, creator, region, seat), which
yields single-hop questions (one document) and two-hop questions (a bridge entity named
in the first document, the answer stated in the second).

Everything is drawn from one ``random.Random(seed)`` and iterated in list order (never
over sets or ``hash()`` of strings), so the same arguments give identical frames.
"""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass, field

import polars as pl

from lc_pipeline import schemas
from lc_pipeline.text import normalize_answer

__all__ = ["DOMAIN", "ENTITY_TYPES", "MAX_ENTITIES", "MIN_ENTITIES", "build_demo_corpus"]

DOMAIN = "fictional_encyclopedia"
ENTITY_TYPES = ("person", "place", "organisation", "work")
MIN_ENTITIES = 8  # two of each type: every relation needs a partner of the right type
MAX_ENTITIES = 100_000  # name space and build time stay comfortable below this

_MAX_WORDS = 400
_TARGET_WORDS = (170, 290)  # ~300 cl100k tokens per document on average

# --------------------------------------------------------------------------- vocabulary

# field -> (organisation kinds, occupations as (singular, plural))
_FIELDS: dict[str, tuple[list[str], list[tuple[str, str]]]] = {
    "music": (
        ["Conservatory", "Choral Society", "Philharmonic Society"],
        [("composer", "composers"), ("conductor", "conductors"), ("violinist", "violinists")],
    ),
    "painting": (
        ["Art Academy", "Drawing School", "Guild of Painters"],
        [("painter", "painters"), ("engraver", "engravers")],
    ),
    "literature": (
        ["Literary Society", "Reading Society", "Poetry Circle"],
        [("novelist", "novelists"), ("poet", "poets"), ("essayist", "essayists")],
    ),
    "astronomy": (
        ["Observatory", "Astronomical Society"],
        [("astronomer", "astronomers"), ("mathematician", "mathematicians")],
    ),
    "cartography": (
        ["Survey Office", "Geographical Society", "Map Institute"],
        [("cartographer", "cartographers"), ("surveyor", "surveyors")],
    ),
    "botany": (
        ["Botanic Garden", "Herbarium", "Botanical Society"],
        [("botanist", "botanists"), ("plant collector", "plant collectors")],
    ),
    "medicine": (
        ["Infirmary", "Medical College", "Fever Hospital"],
        [("physician", "physicians"), ("surgeon", "surgeons")],
    ),
    "law": (
        ["Law School", "Legal Society", "Juridical Academy"],
        [("jurist", "jurists"), ("advocate", "advocates")],
    ),
    "shipbuilding": (
        ["Shipyard", "Dockyard Company", "Naval Workshop"],
        [("shipwright", "shipwrights"), ("naval architect", "naval architects")],
    ),
    "printing": (
        ["Printing House", "Type Foundry", "Printers Guild"],
        [("printer", "printers"), ("typefounder", "typefounders")],
    ),
    "the theatre": (
        ["Playhouse", "Drama School", "Court Theatre"],
        [("playwright", "playwrights"), ("actor", "actors"), ("stage director", "stage directors")],
    ),
}

# What each organisation kind is, for the first sentence ("the X Drama School is a
# drama school" would read badly).
_ORG_DESCRIPTORS = {
    "Conservatory": "a music school", "Choral Society": "an amateur choir", "Philharmonic Society": "a concert society",
    "Art Academy": "a school of fine art", "Drawing School": "a private art school",
    "Guild of Painters": "a professional association of artists", "Literary Society": "a learned society",
    "Reading Society": "a subscription library and club", "Poetry Circle": "a literary club",
    "Observatory": "an astronomical research station", "Astronomical Society": "a learned society",
    "Survey Office": "a public mapping agency", "Geographical Society": "a learned society",
    "Map Institute": "a research institute", "Botanic Garden": "a scientific garden",
    "Herbarium": "a collection of preserved plants", "Botanical Society": "a learned society",
    "Infirmary": "a hospital", "Medical College": "a school of medicine", "Fever Hospital": "a hospital",
    "Law School": "a school of law", "Legal Society": "a professional association of lawyers",
    "Juridical Academy": "a school of law", "Shipyard": "a shipbuilding firm",
    "Dockyard Company": "a shipbuilding firm", "Naval Workshop": "a ship design office",
    "Printing House": "a printing firm", "Type Foundry": "a type manufacturer",
    "Printers Guild": "a trade association", "Playhouse": "a theatre", "Drama School": "a school of acting",
    "Court Theatre": "a theatre",
}

# work kind -> (role named in questions, creation verb, "when" verb, styles, family for details)
_WORK_KINDS: dict[str, tuple[str, str, str, list[str], str]] = {
    "opera": ("composer", "composed", "first performed", ["comic", "tragic", "romantic", "pastoral"], "stage"),
    "symphony": ("composer", "composed", "first performed", ["choral", "programmatic", "short"], "music"),
    "oratorio": ("composer", "composed", "first performed", ["sacred", "secular", "festive"], "music"),
    "orchestral suite": ("composer", "composed", "first performed", ["programmatic", "festive", "short"], "music"),
    "violin concerto": ("composer", "composed", "first performed", ["virtuoso", "lyrical", "late"], "music"),
    "painting": ("painter", "painted", "completed", ["landscape", "portrait", "allegorical", "maritime"], "picture"),
    "altarpiece": ("painter", "painted", "completed", ["gilded", "three-panel", "monumental"], "picture"),
    "engraving": ("engraver", "engraved", "completed", ["topographical", "satirical", "allegorical"], "picture"),
    "novel": ("author", "wrote", "published", ["historical", "epistolary", "satirical", "gothic"], "novel"),
    "play": ("author", "wrote", "first staged", ["comic", "tragic", "historical"], "stage"),
    "poetry collection": ("author", "wrote", "published", ["pastoral", "elegiac", "satirical"], "verse"),
    "essay collection": ("author", "wrote", "published", ["polemical", "philosophical", "travel"], "verse"),
    "treatise": ("author", "wrote", "published", ["short", "two-volume", "polemical"], "reference"),
    "herbal": ("author", "wrote", "published", ["illustrated", "regional", "pocket"], "reference"),
    "medical handbook": ("author", "wrote", "published", ["practical", "illustrated", "concise"], "reference"),
    "legal commentary": ("author", "wrote", "published", ["three-volume", "concise", "influential"], "reference"),
    "shipbuilding manual": ("author", "wrote", "published", ["practical", "illustrated", "two-volume"], "reference"),
    "star catalogue": ("compiler", "compiled", "published", ["comprehensive", "southern", "northern"], "reference"),
    "atlas": ("compiler", "compiled", "published", ["regional", "coastal", "maritime"], "reference"),
    "type specimen book": ("compiler", "compiled", "published", ["illustrated", "comprehensive", "pocket"],
                           "reference"),
    "typeface": ("designer", "designed", "released", ["roman", "italic", "display"], "type"),
}

_OCCUPATION_WORKS: dict[str, list[str]] = {
    "composer": ["opera", "symphony", "oratorio"],
    "conductor": ["orchestral suite", "symphony"],
    "violinist": ["violin concerto"],
    "painter": ["painting", "altarpiece"],
    "engraver": ["engraving"],
    "novelist": ["novel"],
    "poet": ["poetry collection"],
    "essayist": ["essay collection"],
    "astronomer": ["star catalogue", "treatise"],
    "mathematician": ["treatise"],
    "cartographer": ["atlas"],
    "surveyor": ["atlas", "treatise"],
    "botanist": ["herbal", "treatise"],
    "plant collector": ["herbal"],
    "physician": ["medical handbook", "treatise"],
    "surgeon": ["medical handbook"],
    "jurist": ["legal commentary"],
    "advocate": ["legal commentary"],
    "shipwright": ["shipbuilding manual"],
    "naval architect": ["shipbuilding manual", "treatise"],
    "printer": ["type specimen book"],
    "typefounder": ["typeface"],
    "playwright": ["play"],
    "actor": ["play"],
    "stage director": ["play"],
}

_SETTLEMENT_KINDS = ["town", "market town", "city", "port town", "cathedral city", "river port"]
_TITLE_NOUNS = ["Lantern", "Orchard", "Mirror", "Harbour", "Winter", "Crown", "Feast", "Garden",
                "Lighthouse", "Weaver", "Pilgrim", "Ferryman", "Bell", "Tower", "Procession"]
_TITLE_PLURALS = ["Nocturnes", "Variations", "Sketches", "Letters", "Studies", "Elegies", "Tables"]
_TITLE_PATTERNS = ["The {noun} of {stem}", "{stem}", "{stem} {plural}", "Letters from {stem}",
                   "A {noun} for {stem}", "The {stem} {noun}", "{stem} at Dusk"]

# Slot vocabularies: random, non-gold detail that makes documents of one type differ.
_VOCAB: dict[str, list[str]] = {
    "person_adj": ["prolific", "respected", "largely self-taught", "versatile", "meticulous", "influential"],
    "place_adj": ["small", "old", "prosperous", "quiet", "historic", "compact"],
    "direction": ["north", "south", "east", "west", "north-east", "north-west", "south-east", "south-west"],
    "landscape": ["wooded hills", "broad river valleys", "chalk downland", "lakes and marshes", "high moorland",
                  "orchards and vineyards", "sandy heath"],
    "industry": ["the wool trade", "salt", "river trade", "tanning", "brewing", "timber", "slate quarrying"],
    "produce": ["its orchards", "sheep farming", "its vineyards", "barley fields", "hop gardens", "cheese"],
    "emblem": ["a heron", "a lantern", "a three-masted ship", "a star", "an oak tree", "a key", "a swan"],
    "tincture": ["blue", "red", "green", "silver", "gold"],
    "theme": ["duty and personal freedom", "memory and loss", "ambition and its price", "exile and return",
              "faith and doubt", "the old order and the new"],
    "quality": ["restraint", "clarity", "bold colour", "inventive structure", "careful detail", "quiet humour"],
    "habitat": ["wetlands", "old forests", "river meadows", "upland bogs"],
    "num": ["two", "three", "four", "five", "six"],
    "landmark": ["parish church", "town hall", "stone bridge", "harbour wall", "covered market"],
    "parent_job": ["schoolmaster", "miller", "ferryman", "clockmaker", "tailor", "carpenter", "merchant",
                   "pastor", "bookbinder", "apothecary", "weaver", "innkeeper"],
    "talent": ["drawing", "music", "languages", "arithmetic", "natural history", "recitation"],
    "sibling_rank": ["eldest", "youngest", "second"],
    "trait": ["patient", "exacting", "generous", "reserved", "witty", "shy", "courteous", "diligent"],
    "flaw": ["stubborn", "quick-tempered", "impatient", "aloof", "vain", "tactless"],
    "venue": ["a rented room above a bookshop", "the back room of an inn", "a disused chapel",
              "the house of a wealthy patron", "a former granary"],
    "periodical": ["a quarterly bulletin", "a yearbook", "a monthly journal", "an annual almanac"],
    "forces": ["a large orchestra", "strings and winds", "soloists, chorus and orchestra", "a small chamber ensemble"],
    "support": ["canvas", "oak panel", "copper plate", "linen"],
    "scene": ["a harbour at dawn", "a procession crossing a bridge", "musicians in a walled garden",
              "a storm over the marshes", "a market on a winter morning", "travellers resting at an inn"],
    "char_job": ["weaver", "ferryman", "schoolteacher", "clerk", "apprentice", "lighthouse keeper"],
    "setting": ["a fishing village", "a mountain town", "a merchant household", "a garrison town",
                "a country estate", "a provincial court"],
    "spouse_job": ["schoolteacher", "singer", "bookseller", "translator", "watchmaker", "music teacher"],
}
_ORDINALS = {11: "eleventh", 12: "twelfth", 13: "thirteenth", 14: "fourteenth", 15: "fifteenth",
             16: "sixteenth", 17: "seventeenth", 18: "eighteenth", 19: "nineteenth", 20: "twentieth"}

# Syllable parts for names. Plain consonants are listed twice to make them more common
# than clusters; "y" counts as a vowel so "Tessary" reads as two syllables.
_ONSETS = ["b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "b", "d", "k", "l", "m", "n", "r", "s", "t", "v",
           "br", "dr", "gr", "kr", "tr", "th", "st", "sk", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "o", "a", "e", "i", "o", "ae", "y"]
_CODAS = ["n", "r", "l", "s", "k", "th", "m", "nd", "rn", "st"]
_SUFFIXES = {
    "family": ["", "", "ik", "ar", "en", "ov", "ell", "and", "is", "er", "in", "ey"],
    "settlement": ["holm", "mar", "vik", "stad", "ford", "wick", "dun", "gard", "esh", "bury", "mouth",
                   "ness", "thorpe", "ley", "by"],
    "region": ["mark", "vale", "reach", "march", "land", "ia", "mere", "fell"],
    "river": ["", "", "a", "e", "el", "is", "ane"],
    "org": ["", "y", "er", "ine", "ion", "ar"],
    "work": ["", "a", "el", "ion", "ine", "is"],
    "female": ["a", "elle", "ine", "is", "ette", "ia", "wen", "ys", "ra"],
    "male": ["an", "or", "ek", "as", "ric", "ul", "en", "os", "im"],
}
_VOWEL_LETTERS = frozenset("aeiouy")

# Real places and people the syllables could reproduce, plus words best kept out of names.
# Entries of 3 letters or fewer must equal a whole name; longer ones block any name containing them.
_BLOCKED = """
paris london rome berlin vienna milan oslo lima cairo delhi tokyo dublin bergen boston denver dallas
austin houston madrid lisbon porto prague sofia riga kyiv kiev minsk moscow warsaw malmo turin siena
pisa genoa verona naples lyon lille bern basel zurich geneva hamburg bremen essen bonn mainz kassel
dresden leipzig halle jena trier ghent bruges delft leiden utrecht haarlem arnhem breda york leeds
bath derby dover hull ely wells durham exeter oxford cambridge kent devon essex sussex surrey perth
sydney darwin hobart cork galway sligo troy sparta athens thebes delphi crete malta cyprus texas utah
ohio iowa idaho nevada maine kansas peru chile cuba haiti mali chad niger oman iran iraq india china
japan korea nepal laos fiji samoa tonga kenya sudan congo ghana benin togo gabon libya egypt syria
israel jordan yemen qatar sweden norway denmark finland latvia russia poland serbia bosnia greece
turkey spain france italy europe asia africa america amazon nile volga danube rhine thames seine
tiber loire elbe oder ganges indus tigris mary maria anna john peter paul david james sarah emma
olivia elena victor ivan boris igor oscar hugo otto karl hans lars sven nils erik olaf tom tim ben
sam dan ella eva ida lena nora vera mila kara lara tara dora rosa rita nina gina tina lisa sara hera
zeus thor odin loki freya isis osiris mars venus luna sol terra vesta juno titan orion sirius vega
lyra draco gondor mordor rohan narnia hogwarts westeros arrakis tolkien stalin hitler lenin marx
sex rape nazi nig fag cum cock dick shit fuck cunt piss slut whore porn anus anal tit ass butt poo
kill dead hell damn satan devil jesus allah
""".split()


_BLOCKED_WHOLE = frozenset(w for w in _BLOCKED if len(w) <= 3)
_BLOCKED_PART = re.compile("|".join(w for w in _BLOCKED if len(w) > 3))


def _blocked(word: str) -> bool:
    low = word.lower()
    return low in _BLOCKED_WHOLE or _BLOCKED_PART.search(low) is not None


# --------------------------------------------------------------------------- prose templates
# Facts are (section, facts stated, text); fillers are (section, text). Sections order the
# document (0 origins, 1 main body, 2 later history / reception) and become its paragraphs,
# so shuffling stays inside a section and the prose keeps a sensible chronology.
# An entity's document must state every fact its questions rely on: the composer picks fact
# templates until none is left, so the phrasing and the order vary while content is complete.
# Fillers name no other entity and state no gold fact, so they add realistic bulk without
# creating a second, possibly conflicting, source for any answer.

_PERSON_INTROS = [
    (("occupation", "death"), "{name} ({birth}–{death}) was {a_occupation}."),
    (("occupation", "employer"), "{name} was {a_occupation} whose career was closely tied to the {employer}."),
    (("birth", "occupation"), "Born in {birthplace} in {birth}, {name} became one of the better-known "
                              "{occupations} of {poss} generation."),
    (("occupation",), "{name} was {a_adj_occupation}."),
    (("birth", "death", "occupation"), "{name} (born {birth} in {birthplace}; died {death}) was {a_occupation}."),
    ((), "{name} is remembered today mainly by specialists, although {pron} enjoyed a considerable "
         "reputation during {poss} lifetime."),
    (("occupation",), "Among the {occupations} of {poss} time, {name} occupies a distinctive place."),
]
_PERSON_FACTS = [
    (0, ("birth",), "{name} was born in {birthplace} in {birth}."),
    (0, ("birth",), "{Pron} was born in {birth} in the {bp_kind} of {birthplace}."),
    (0, ("birth",), "{surname} was born in {birth} at {birthplace}, where {poss} family had lived for "
                    "several generations."),
    (0, ("birth",), "{Pron} was born in {birthplace} in {birth} and spent {poss} childhood there."),
    (1, ("occupation",), "{Pron} worked as {a_occupation}."),
    (1, ("occupation",), "{surname} made {poss} living as {a_occupation}."),
    (1, ("occupation",), "By profession {surname} was {a_occupation}."),
    (1, ("occupation",), "Contemporaries knew {obj} above all as {a_occupation}."),
    (2, ("death",), "{surname} died in {death}."),
    (2, ("death",), "{Pron} died in {death} at the age of {age}."),
    (2, ("death",), "{surname} died in {death}, still at work on several unfinished projects."),
]
_EMPLOYEE_FACTS = [
    (1, ("employer",), "For most of {poss} career {pron} was employed by the {employer}."),
    (1, ("employer",), "{surname} spent many years at the {employer}."),
    (1, ("employer",), "{Pron} was a long-serving member of the {employer}."),
    (1, ("employer",), "{Poss} principal appointment was with the {employer}."),
    (1, ("occupation", "employer"), "{surname} worked as {a_occupation} at the {employer}."),
    (1, ("occupation", "employer"), "At the {employer}, {pron} worked as {a_occupation} for many years."),
]
_FOUNDER_EMPLOYER_FACTS = [
    (1, ("employer",), "{Pron} directed the {employer} for many years."),
    (1, ("employer",), "{surname} remained closely involved with the {employer} for the rest of {poss} career."),
    (1, ("employer",), "{Pron} led the {employer} through its early years."),
]
_PERSON_FOUNDED = [
    "In {year}, {surname} founded the {org}.",
    "{Pron} founded the {org} in {year}.",
    "{surname} was the founder of the {org}, established in {year}.",
]
_PERSON_WORK = [
    "{Pron} {verb} the {kind} {title}, which was {when} in {year}.",
    "{Poss} {kind} {title} was {when} in {year}.",
    "In {year} {surname}'s {kind} {title} was {when}.",
    "{title}, {a_kind} {when} in {year}, is among {poss} best-known works.",
]
_PERSON_FILLERS = [
    (0, "{Pron} was educated privately before entering a small provincial college.|"
        "{Pron} received {poss} early schooling at home and later attended a provincial college."),
    (0, "Few of {poss} early letters survive.|{Poss} early notebooks have not survived."),
    (0, "{Poss} father was a {parent_job} and {poss} mother the daughter of a {parent_job2}.|"
        "{Pron} was the child of a {parent_job} and grew up in modest circumstances."),
    (0, "As a child {pron} showed an early talent for {talent}.|"
        "From an early age {pron} was drawn to {talent}."),
    (0, "{Pron} was the {sibling_rank} of {num} children."),
    (0, "At the age of {teen} {pron} was sent to live with an uncle.|"
        "At {teen} {pron} left home to serve an apprenticeship."),
    (0, "An early teacher, whose name has not survived, encouraged {poss} interest in {talent2}."),
    (1, "In {ya}, {pron} travelled for several months, filling notebooks with sketches and observations.|"
        "A long journey in {ya} gave {obj} material for years of work."),
    (1, "Colleagues described {surname} as {trait}, {trait2} and occasionally {trait3}.|"
        "Those who knew {obj} found {obj} {trait} and {trait2}, if at times {trait3}."),
    (1, "{Pron} married {spouse}, a {spouse_job}, in {yb}; they had {num2} children.|"
        "In {yb} {pron} married {spouse}, a {spouse_job}."),
    (1, "{Poss} methods were regarded as unusually careful for the period.|"
        "{Pron} was known for working slowly and checking every detail."),
    (1, "{surname} took on a number of pupils, some of whom later became well known in their own right.|"
        "Several of {poss} pupils went on to distinguished careers."),
    (1, "{Pron} was elected to several learned societies abroad.|"
        "Honours came late, mostly from abroad."),
    (1, "{Poss} lectures were well attended, though {pron} disliked speaking in public.|"
        "{Pron} taught for a time, without much enthusiasm."),
    (1, "Although {pron} was often short of money, {pron} refused several lucrative offers.|"
        "Money was a constant worry throughout {poss} working life."),
    (1, "{surname} spoke {num3} languages and translated a number of foreign texts."),
    (1, "During a long illness in {yc}, {pron} withdrew almost entirely from public life.|"
        "An illness in {yc} kept {obj} from work for most of a year."),
    (1, "A stay of several months in {travel} in {yd} left a lasting mark on {poss} outlook.|"
        "In {yd} {pron} spent a winter in {travel}."),
    (1, "{Pron} kept a detailed diary from {ye} onwards.|{Poss} diaries, begun in {ye}, are an important source."),
    (2, "In later life {pron} lived quietly and rarely received visitors.|"
        "{Poss} last years were spent in retirement."),
    (2, "A street in {poss} home town now bears {poss} name.|A school in {poss} home town is named after {obj}."),
    (2, "Opinions of {poss} achievements have shifted considerably over the past century.|"
        "{Poss} reputation declined after {poss} death and has only recently recovered."),
    (2, "An edition of {poss} collected papers appeared in {ypost}."),
    (2, "Historians still debate the extent of {poss} influence on the following generation."),
    (2, "{Poss} correspondence, much of it still unpublished, runs to several thousand letters."),
    (2, "A portrait of {surname} made in {yf} hangs in a private collection."),
    (2, "Later biographers have tended to overstate the drama of {poss} quarrels with rivals."),
    (2, "Friends recalled {poss} dry humour and {poss} habit of walking for hours each morning."),
    (2, "Several of {poss} notebooks were lost in a fire, which has left gaps in the record."),
    (2, "A memorial plaque was unveiled on the centenary of {poss} birth."),
]

_ORG_INTROS = [
    (("field",), "The {name} is {a_desc} devoted to {field}."),
    (("hq",), "The {name} is {a_desc} based in {hq}."),
    (("founded", "founder"), "The {name} is {a_desc} founded in {year} by {founder}."),
    (("hq", "founded"), "Established in {hq} in {year}, the {name} is among the older institutions of its kind."),
    (("field",), "The {name} is one of the principal institutions in the field of {field}."),
    (("field",), "The {name} occupies a modest but respected place in the history of {field}."),
]
_ORG_FACTS = [
    (0, ("founded", "founder"), "The {kindl} was founded in {year} by {founder}."),
    (0, ("founded", "founder"), "{founder} established the {name} in {year}."),
    (0, ("founded", "founder"), "Its origins go back to {year}, when {founder} brought together a small circle "
                                "of like-minded {occupations}."),
    (0, ("founded",), "The {kindl} was founded in {year}."),
    (0, ("founded",), "It was established in {year}."),
    (0, ("founded",), "Its foundation dates to {year}."),
    (0, ("founder",), "Its founder was {founder}."),
    (0, ("founder",), "The {kindl} owes its existence to {founder}."),
    (1, ("hq",), "Its headquarters are in {hq}."),
    (1, ("hq",), "The {kindl} has its seat in {hq}."),
    (1, ("hq",), "It is based in {hq}."),
    (1, ("hq",), "{hq} has been home to the {kindl} since its early years."),
    (1, ("field",), "Its work centres on {field}."),
    (1, ("field",), "The {kindl} is devoted to {field}."),
    (1, ("field",), "It concerns itself chiefly with {field}."),
]
_ORG_MEMBERS = [
    "Notable members have included {list}.",
    "Among those who worked there {were} {list}.",
    "{list} {were} among its best-known members.",
]
_ORG_FILLERS = [
    (0, "Its early years were marked by chronic shortages of money.|Money was scarce in the early years."),
    (0, "The first meetings were held in {venue}.|At first it had no premises of its own and met in {venue}."),
    (0, "Its first statutes ran to only {pages} pages."),
    (0, "Records from its first decades survive only in fragments.|"
        "Little documentation survives from its first decades."),
    (0, "Its seal shows {emblem} above a pair of crossed keys."),
    (1, "Its library holds several thousand volumes, including rare early editions.|"
        "It maintains a small but valuable library."),
    (1, "The {kindl} is governed by a council elected every {num} years."),
    (1, "Public lectures are held there every winter.|It organises a series of public lectures each year."),
    (1, "It publishes {periodical}, which has appeared almost without interruption since {ya}."),
    (1, "Several of its members travelled widely and kept in touch with similar bodies abroad."),
    (1, "The {kindl} awards a small annual prize for outstanding work in {field}."),
    (1, "It currently employs around {staff} people.|Its staff numbers about {staff}."),
    (1, "Membership grew steadily during the {decade}.|The {decade} were a period of rapid growth."),
    (1, "Relations with the municipal authorities were often strained."),
    (2, "The {kindl} moved into larger premises in {yb}.|In {yb} it moved to a new building."),
    (2, "In {yc}, a fire destroyed part of its archive."),
    (2, "During wartime its activities were reduced to a minimum."),
    (2, "A reorganisation in {yd} gave it a more formal constitution."),
    (2, "Critics have at times accused the {kindl} of conservatism.|It has been criticised for its cautious policies."),
    (2, "The main building, with its tall arched windows, is a local landmark."),
    (2, "An endowment received in {ye} secured its finances for decades.|"
        "A large bequest in {ye} put it on a sound footing."),
    (2, "Women were admitted as full members from {yf}."),
    (2, "A modest museum on the ground floor is open to visitors on weekdays."),
]

_WORK_INTROS = [
    (("creator",), "{title} is {a_style_kind} by {creator}."),
    (("creator", "year"), "{title} is {a_kind} {verb} by {creator} and {when} in {year}."),
    ((), "{title} is {a_style_kind}."),
    (("year",), "{When} in {year}, {title} is {a_style_kind}."),
    (("creator",), "{title} is among the best-known works of {creator}."),
]
_WORK_FACTS = [
    (0, ("creator", "year"), "{creator} {verb} it, and it was {when} in {year}."),
    (0, ("creator", "year"), "It was {verb} by {creator} and {when} in {year}."),
    (0, ("creator",), "It was {verb} by {creator}."),
    (0, ("creator",), "The {kind} is the work of {creator}."),
    (0, ("creator",), "{creator} {verb} it over a period of several years."),
    (0, ("year",), "It was {when} in {year}."),
    (0, ("year",), "The {kind} was {when} in {year}."),
    (0, ("year",), "{title} was {when} in {year}."),
]
# (section, families it suits, text): a star catalogue has no plot and a painting no chapters.
_WORK_FILLERS = [
    (0, "*", "Little is known about the circumstances of its commission.|"
             "The circumstances of its commission are obscure."),
    (0, "*", "The work was dedicated to an unnamed patron.|"
             "It carries a dedication to a patron whose identity is uncertain."),
    (0, "*", "Several preparatory drafts survive and show how much the conception changed.|"
             "Surviving drafts show that the conception changed considerably during work."),
    (0, "*", "The {kind} was revised several times before reaching its final form."),
    (0, "*", "Work on it was interrupted for several years by illness and lack of money."),
    (2, "*", "It has been the subject of several scholarly studies.|"
             "A substantial scholarly literature has grown up around it."),
    (2, "*", "The {kind} is often cited as a turning point in its creator's career."),
    (2, "*", "Early reviews were mixed, though the {kind} soon found an audience.|"
             "Contemporary opinion was divided at first."),
    (1, "stage novel verse picture", "Its central theme is the tension between {theme}."),
    (1, "music stage novel verse picture reference", "Critics have praised its {quality}."),
    (1, "music stage novel verse", "Its structure is unusual for the period.|Its form was unusual for the time."),
    (1, "music stage novel verse", "The final section is widely regarded as the strongest."),
    (1, "music stage verse picture", "Scholars have pointed to the influence of folk traditions on the {kind}."),
    (2, "music stage novel verse", "Some contemporaries found its tone too severe."),
    (2, "music stage", "A revival in {ya} restored it to public attention."),
    (2, "music stage novel verse", "Interest in the {kind} declined after {yb}, before a revival in {yd}."),
    (2, "music stage", "Modern audiences tend to value it more highly than its first critics did."),
    (2, "novel verse", "Modern readers tend to value it more highly than its first critics did."),
    (2, "stage novel", "It was later adapted several times."),
    (2, "novel verse reference", "Copies circulated widely in the decades after its publication."),
    (2, "music novel verse reference", "A critical edition prepared in {yc} corrected many long-standing errors."),
    (2, "stage novel verse reference", "The manuscript is now held in a regional archive."),
    # music
    (0, "music", "It is scored for {forces}."),
    (1, "music", "A typical performance lasts about {minutes} minutes."),
    (1, "music", "The {kind} is in {num} movements."),
    (1, "music", "Its slow movement is built on a simple folk melody.|Its slow movement quotes a popular song."),
    (2, "music", "The autograph score is now held in a regional archive."),
    (2, "music", "The first performance was poorly rehearsed and nearly failed.|"
                 "The premiere was under-rehearsed, and the first reviews were cool."),
    # opera and plays
    (1, "stage", "The story follows {char}, a young {char_job} in {setting}."),
    (1, "stage", "The {kind} is in {num} acts."),
    (1, "stage", "The action takes place over a single day in {setting2}."),
    (0, "stage", "The first cast included several performers who later became famous."),
    (2, "stage", "Revivals in {ya} and {yd} were both well received."),
    # novels
    (1, "novel", "The story follows {char}, a young {char_job} in {setting}."),
    (1, "novel", "It is narrated by {char}, a {char_job} who looks back on the events decades later."),
    (0, "novel verse reference", "The first edition ran to about {pages} pages."),
    (0, "novel verse", "It first appeared in instalments in a literary magazine."),
    (2, "novel verse", "It has been translated into {num} languages."),
    # poetry and essays
    (1, "verse", "It contains some {count} pieces, many of them written while travelling."),
    (1, "verse", "The opening piece is among the most frequently quoted of its period."),
    # pictures
    (1, "picture", "It shows {scene}."),
    (0, "picture", "It is executed on {support} and measures {h} by {w} centimetres."),
    (1, "picture", "The composition is dominated by a diagonal band of light."),
    (1, "picture", "Its palette is restrained, dominated by browns and greys.|"
                   "Its colours are unusually bright for the period."),
    (2, "picture", "It now hangs in a provincial museum.|It is now in a private collection."),
    (2, "picture", "It was cleaned and restored in {yc}."),
    (2, "picture", "Modern viewers tend to value it more highly than its first critics did."),
    (2, "picture", "Several copies by pupils and imitators are known."),
    # reference works
    (1, "reference", "It covers {coverage}."),
    (1, "reference", "It is divided into {num} parts, each with its own index."),
    (1, "reference", "Its many tables and illustrations were prepared with unusual care."),
    (2, "reference", "It remained a standard reference for several decades.|"
                     "For several decades it was the standard work on its subject."),
    (2, "reference", "A revised edition appeared in {ya}."),
    # typefaces
    (1, "type", "The design includes some {glyphs} characters."),
    (1, "type", "It was intended for setting books in small sizes.|It was designed above all for newspapers."),
    (0, "type", "Punches for the first sizes were cut by hand."),
    (2, "type", "It remained in use for several generations.|Printers continued to use it for several generations."),
    (2, "type", "Later versions added bold and condensed weights."),
    (1, "type", "Its letterforms are narrow, with short descenders and sharp serifs."),
    (2, "type", "A revival cut in {yc} brought it back into fashion."),
    (0, "type", "The first specimen sheet showing it was printed in a small run."),
]
# What a reference work covers depends on its kind.
_COVERAGE = {
    "treatise": ["its subject in strict systematic order", "both the theory and the practice of its subject"],
    "herbal": ["more than a thousand plants", "the medicinal plants of the region"],
    "medical handbook": ["the treatment of common fevers and wounds", "the care of the sick at home"],
    "legal commentary": ["every court case of note from the preceding century", "the whole of the civil code"],
    "shipbuilding manual": ["the design of merchant vessels", "the building of small coastal ships"],
    "star catalogue": ["the positions of several thousand stars", "the stars of the southern sky"],
    "atlas": ["the whole of the known coast", "every parish of the surrounding regions"],
    "type specimen book": ["all the typefaces then in stock", "several hundred founts and ornaments"],
}

_SETTLEMENT_INTROS = [
    (("region",), "{name} is {a_skind} in {region}."),
    (("river",), "{name} is {a_skind} on the River {river}."),
    (("region", "river"), "{name} is {a_skind} in {region}, lying on the {river}."),
    ((), "{name} is {a_adj_skind}."),
    (("founded",), "{name} is {a_skind} founded in {year}."),
]
_SETTLEMENT_FACTS = [
    (0, ("region",), "It lies in {region}."),
    (0, ("region",), "Administratively, {name} belongs to {region}."),
    (0, ("region",), "The {skind} is part of the region of {region}."),
    (0, ("river",), "The {skind} lies on the River {river}."),
    (0, ("river",), "{name} stands on the banks of the {river}."),
    (0, ("river",), "The {river} flows through the centre of the {skind}."),
    (0, ("river",), "It is built along both banks of the {river}."),
    (1, ("founded",), "{name} was founded in {year}."),
    (1, ("founded",), "The settlement was founded in {year}."),
    (1, ("founded",), "{name} dates its foundation to {year}."),
    (1, ("founded",), "According to local records, the {skind} was founded in {year}."),
    (0, ("population",), "It has a population of about {pop}."),
    (0, ("population",), "About {pop} people live there today."),
    (0, ("population",), "The {skind} has roughly {pop} inhabitants."),
]
_SEAT_OF = ["{name} is the seat of {region}.", "It serves as the administrative seat of {region}."]
_NATIVES = ["Notable people born in {name} include {list}.", "Among those born here {were} {list}."]
_HOSTED = ["It is home to {list}.", "{name} is home to {list}."]
_SETTLEMENT_FILLERS = [
    (0, "The climate is mild, with damp winters and cool summers."),
    (0, "The surrounding countryside is known for {produce}."),
    (0, "The nearby hills offer extensive views over the valley."),
    (0, "The {skind} lies at an altitude of about {alt} metres."),
    (1, "Its {landmark} dates largely from the {century} century."),
    (1, "The local economy long depended on {industry}."),
    (1, "A railway connection opened in {ya}, bringing new trade."),
    (1, "A fire in {yb} destroyed much of the eastern quarter."),
    (1, "Its population declined sharply after an outbreak of plague in {yplague}."),
    (1, "Travellers in the {century2} century described it as quiet and prosperous."),
    (1, "Flooding was a recurring problem until new embankments were built in {yc}."),
    (2, "The old centre is arranged around a broad market square."),
    (2, "Several annual fairs are held in the {skind}, the largest in late summer."),
    (2, "A small museum documents the history of the {skind}."),
    (2, "The {skind} has a well-regarded grammar school."),
    (2, "Many of the older houses are built of local grey stone."),
    (2, "In recent decades tourism has become increasingly important."),
    (2, "Its coat of arms shows {emblem} on a {tincture} field."),
    (2, "A weekly market is still held in the old square."),
]

_REGION_INTROS = [
    ((), "{name} is a region in the {direction} of the country."),
    (("seat",), "{name} is a largely rural region whose seat is {seat}."),
    ((), "{name} is a historic region known for its {landscape}."),
]
_REGION_FACTS = [
    (0, ("seat",), "Its seat is {seat}."),
    (0, ("seat",), "The administrative seat of {name} is {seat}."),
    (0, ("seat",), "{seat} serves as the seat of the region."),
    (0, ("seat",), "The regional government sits in {seat}."),
    (0, ("area",), "The region covers about {area} square kilometres."),
    (0, ("area",), "It has an area of roughly {area} square kilometres."),
]
_REGION_TOWNS = ["Other towns in the region include {list}.", "Besides the seat, the main settlements are {list}."]
_REGION_FILLERS = [
    (0, "The landscape is dominated by {landscape2}."),
    (0, "Its northern part is thinly populated."),
    (0, "Its borders have changed several times over the centuries."),
    (0, "Winters are long and summers short but often warm."),
    (0, "The highest point of the region rises to {peak} metres."),
    (1, "Agriculture remains the most important source of employment."),
    (1, "The region was reorganised administratively in {ya}."),
    (1, "The economy has diversified since the {decade}, with light industry and tourism."),
    (1, "The region is crossed by an old trade route that once carried salt and wool."),
    (1, "A census taken in {yb} recorded a sharp fall in the rural population."),
    (1, "Many inhabitants emigrated during the hard decades of the {century} century."),
    (1, "Its forests were once an important source of timber for shipbuilding."),
    (1, "Roads across the uplands are often closed in winter."),
    (2, "A regional dialect is still spoken in many villages."),
    (2, "The regional assembly meets {num} times a year."),
    (2, "Several nature reserves protect its {habitat}."),
    (2, "Numerous castles and manor houses survive from earlier centuries."),
    (2, "Local cuisine relies heavily on smoked fish and rye bread."),
    (2, "Folk festivals mark the end of the harvest in most villages."),
]


def _reserved_text() -> str:
    """The lower-cased fixed prose and vocabulary.

    A generated name must not occur inside it, so that finding a name in a text always
    means the entity is mentioned (and never a word of the prose around it).
    """
    parts: list[str] = []
    for group in (_PERSON_INTROS, _ORG_INTROS, _WORK_INTROS, _SETTLEMENT_INTROS, _REGION_INTROS):
        parts += [t for _, t in group]
    for group in (_PERSON_FACTS, _EMPLOYEE_FACTS, _FOUNDER_EMPLOYER_FACTS, _ORG_FACTS, _WORK_FACTS,
                  _SETTLEMENT_FACTS, _REGION_FACTS):
        parts += [t for _, _, t in group]
    for group in (_PERSON_FILLERS, _ORG_FILLERS, _SETTLEMENT_FILLERS, _REGION_FILLERS):
        parts += [t for _, t in group]
    parts += [t for _, _, t in _WORK_FILLERS] + [c for cs in _COVERAGE.values() for c in cs]
    parts += list(_ORG_DESCRIPTORS.values())
    parts += _PERSON_FOUNDED + _PERSON_WORK + _ORG_MEMBERS + _SEAT_OF + _NATIVES + _HOSTED + _REGION_TOWNS
    parts += list(_FIELDS) + [k for kinds, _ in _FIELDS.values() for k in kinds]
    parts += [o for _, occs in _FIELDS.values() for pair in occs for o in pair]
    parts += [" ".join([k, *v[:3], *v[3]]) for k, v in _WORK_KINDS.items()]
    parts += _SETTLEMENT_KINDS + _TITLE_NOUNS + _TITLE_PLURALS + _TITLE_PATTERNS + list(_ORDINALS.values())
    parts += [w for words in _VOCAB.values() for w in words]
    return " | ".join(parts).lower()


# --------------------------------------------------------------------------- entities


@dataclass(eq=False)
class _Place:
    name: str
    kind: str  # "region" or a settlement kind
    region: _Place | None = None
    river: str = ""
    founded: int = 0
    population: int = 0
    area: int = 0
    seat: _Place | None = None
    settlements: list[_Place] = field(default_factory=list)
    natives: list[_Person] = field(default_factory=list)
    hosted: list[_Org] = field(default_factory=list)
    doc_id: str = ""
    text: str = ""
    etype: str = "place"


@dataclass(eq=False)
class _Person:
    name: str
    given: str
    family: str
    female: bool
    birth: int
    birthplace: _Place
    occupation: str = ""
    occupations: str = ""  # plural, for prose
    employer: _Org | None = None
    death: int = 0
    founded_orgs: list[_Org] = field(default_factory=list)
    works: list[_Work] = field(default_factory=list)
    doc_id: str = ""
    text: str = ""
    etype: str = "person"


@dataclass(eq=False)
class _Org:
    name: str
    stem: str
    kind: str
    field_: str
    hq: _Place
    founder: _Person | None = None
    founded: int = 0
    members: list[_Person] = field(default_factory=list)
    doc_id: str = ""
    text: str = ""
    etype: str = "organisation"


@dataclass(eq=False)
class _Work:
    name: str
    stem: str
    kind: str
    style: str
    creator: _Person
    year: int
    doc_id: str = ""
    text: str = ""
    etype: str = "work"


# --------------------------------------------------------------------------- names


def _pronounceable(word: str) -> bool:
    consonants = vowels = 0
    for ch in word:
        if ch in _VOWEL_LETTERS:
            consonants, vowels = 0, vowels + 1
        else:
            consonants, vowels = consonants + 1, 0
        if consonants > 2 or vowels > 2:
            return False
    return not any(v + v in word for v in "aeiouy")


class _Names:
    """Unique, mutually substring-free name tokens.

    Every title contains exactly one generated token (surname, place name, stem), and no
    token occurs inside another token, a given name or the fixed prose; hence no title is a
    substring of another title. Lookups use the set of all substrings of the tokens so far,
    which keeps generation linear in the number of names.
    """

    def __init__(self, rng: random.Random, reserved: str):
        self.rng = rng
        self.reserved = reserved
        self.tokens: set[str] = set()
        self.substrings: set[str] = set()

    def _word(self, syllables: int, kind: str) -> str:
        r = self.rng
        word = ""
        for i in range(syllables):
            word += ("" if i == 0 and r.random() < 0.25 else r.choice(_ONSETS)) + r.choice(_VOWELS)
            if r.random() < (0.5 if i == syllables - 1 else 0.3):
                word += r.choice(_CODAS)
        suffix = r.choice(_SUFFIXES[kind])
        if suffix and word[-1] in _VOWEL_LETTERS and suffix[0] in _VOWEL_LETTERS:
            word = word[:-1]  # "Vora" + "ine" -> "Vorine", not "Voraine"
        return word + suffix

    def make(self, kind: str) -> str:
        for _ in range(10_000):
            word = self._word(2 if self.rng.random() < 0.85 else 3, kind)
            if not (5 <= len(word) <= 11) or not _pronounceable(word):
                continue
            if word in self.substrings or word in self.reserved or _blocked(word):
                continue
            n = len(word)
            if any(word[i:j] in self.tokens for i in range(n) for j in range(i + 1, n + 1)):
                continue
            self.tokens.add(word)
            self.substrings.update(word[i:j] for i in range(n) for j in range(i + 1, n + 1))
            return word.capitalize()
        raise RuntimeError(f"could not generate a fresh {kind} name")  # unreachable below MAX_ENTITIES

    def given_names(self, kind: str, count: int) -> list[str]:
        # Given names repeat across people (as in life), so they stay out of the token
        # registry, but they are reserved: no generated token may hide inside one.
        out: list[str] = []
        while len(out) < count:
            word = self._word(1 if self.rng.random() < 0.5 else 2, kind)
            if 4 <= len(word) <= 8 and _pronounceable(word) and word.capitalize() not in out \
                    and not _blocked(word) and word not in self.reserved:
                out.append(word.capitalize())
        self.reserved += " | " + " | ".join(w.lower() for w in out)
        return out


# --------------------------------------------------------------------------- helpers


_DROP_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def _normalize_text(s: str) -> str:
    """text.normalize_answer, with str.translate instead of a per-character loop (long texts)."""
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_DROP_PUNCT)).split())


def _a(phrase: str) -> str:
    return ("an " if phrase[0].lower() in "aeiou" else "a ") + phrase


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _anaphor(kind: str) -> str:
    # "Guild of Painters" -> "guild", "Choral Society" -> "society"
    words = kind.lower().split()
    return words[0] if "of" in words else words[-1]


def _years(rng: random.Random, lo: int, hi: int, k: int) -> list[int]:
    """k distinct years in [lo, hi], so two fillers of one document never share a year."""
    return rng.sample(range(lo, max(hi, lo + k) + 1), k)


def _vocab(rng: random.Random, **names: str) -> dict[str, str]:
    """Slot -> random word from a vocabulary list; ``trait2="trait"`` draws a second, different one."""
    out: dict[str, str] = {}
    for slot, vocab in names.items():
        taken = [v for s, v in out.items() if names[s] == vocab]
        out[slot] = rng.choice([w for w in _VOCAB[vocab] if w not in taken])
    return out


def _compose(rng: random.Random, intros, facts, slots: dict, extra: list[tuple[int, str]],
             fillers: list[tuple[int, str]], needed: list[str]) -> str:
    """Intro, then the required facts (random templates), mentions of related entities and
    neutral fillers, shuffled within their section; one paragraph per non-empty section."""
    usable = [(k, t) for k, t in intros if all(f in needed for f in k)]
    keys, tpl = rng.choice(usable)
    intro = tpl.format_map(slots)
    sections: list[list[str]] = [[], [], []]
    remaining = [f for f in needed if f not in keys]
    while remaining:
        cands = [(sec, k, t) for sec, k, t in facts if all(f in remaining for f in k)]
        sec, k, t = rng.choice(cands)
        sections[sec].append(t.format_map(slots))
        remaining = [f for f in remaining if f not in k]
    for sec, sentence in extra:
        sections[sec].append(sentence)
    words = len(intro.split()) + sum(len(s.split()) for sec in sections for s in sec)
    target = rng.randint(*_TARGET_WORDS)
    for sec, tpl in rng.sample(fillers, len(fillers)):
        if words >= target:
            break
        sentence = rng.choice(tpl.split("|")).format_map(slots)  # "|" separates alternative phrasings
        n = len(sentence.split())
        if words + n <= _MAX_WORDS - 10:
            sections[sec].append(sentence)
            words += n
    for sec in sections:
        rng.shuffle(sec)
    sections[0].insert(0, intro)
    return "\n\n".join(" ".join(sec) for sec in sections if sec)


# --------------------------------------------------------------------------- world


@dataclass
class _World:
    regions: list[_Place]
    settlements: list[_Place]
    people: list[_Person]
    orgs: list[_Org]
    works: list[_Work]
    given_names: list[str]


def _build_world(n: int, rng: random.Random) -> _World:
    names = _Names(rng, _reserved_text())
    female_given = names.given_names("female", 60)
    male_given = names.given_names("male", 60)

    n_places = max(2, round(n * 0.22))
    n_orgs = max(2, round(n * 0.18))
    n_works = max(2, round(n * 0.20))
    n_people = n - n_places - n_orgs - n_works
    n_regions = max(1, round(n_places / 6))
    n_settlements = n_places - n_regions

    regions = [_Place(names.make("region"), "region", area=rng.randrange(800, 9000, 10)) for _ in range(n_regions)]
    rivers = [names.make("river") for _ in range(max(1, round(n_settlements * 0.6)))]
    settlements = []
    for i in range(n_settlements):
        region = regions[i] if i < n_regions else rng.choice(regions)  # round-robin first: every region gets a seat
        s = _Place(names.make("settlement"), rng.choice(_SETTLEMENT_KINDS), region=region, river=rng.choice(rivers),
                   founded=rng.randint(1040, 1690))
        s.population = rng.randrange(40_000, 600_000, 1_000) if "city" in s.kind else rng.randrange(2_000, 60_000, 500)
        region.settlements.append(s)
        settlements.append(s)
    for r in regions:
        r.seat = rng.choice(r.settlements)

    orgs = []
    for _ in range(n_orgs):
        fld = rng.choice(list(_FIELDS))
        stem = names.make("org")
        kind = rng.choice(_FIELDS[fld][0])
        orgs.append(_Org(f"{stem} {kind}", stem, kind, fld, hq=rng.choice(settlements)))

    people = []
    for _ in range(n_people):
        female = rng.random() < 0.5
        given = rng.choice(female_given if female else male_given)
        family = names.make("family")
        p = _Person(f"{given} {family}", given, family, female, birth=rng.randint(1690, 1920),
                    birthplace=rng.choice(settlements))
        p.birthplace.natives.append(p)
        people.append(p)

    # Founders: distinct people while there are enough; founding 24-55 years after birth.
    pool = rng.sample(people, len(people))
    for i, org in enumerate(orgs):
        founder = pool[i % len(pool)]
        org.founder = founder
        org.founded = founder.birth + rng.randint(24, 55)
        founder.founded_orgs.append(org)

    # Employers: a founder works for (the first of) their own foundations; anyone else for an
    # organisation that already existed when they were about 45, when there is one.
    for p in people:
        if p.founded_orgs:
            p.employer = p.founded_orgs[0]
        else:
            existing = [o for o in orgs if o.founded <= p.birth + 45]
            p.employer = rng.choice(existing or orgs)
            p.employer.members.append(p)
        p.occupation, p.occupations = rng.choice(_FIELDS[p.employer.field_][1])

    works = []
    for _ in range(n_works):
        creator = rng.choice(people)
        kind = rng.choice(_OCCUPATION_WORKS[creator.occupation])  # a violinist writes no atlas
        stem = names.make("work")
        title = rng.choice(_TITLE_PATTERNS).format(stem=stem, noun=rng.choice(_TITLE_NOUNS),
                                                   plural=rng.choice(_TITLE_PLURALS))
        style = rng.choice(_WORK_KINDS[kind][3])
        w = _Work(title, stem, kind, style, creator, year=creator.birth + rng.randint(22, 60))
        creator.works.append(w)
        works.append(w)

    for p in people:  # die after everything the person did
        last_event = max([p.birth + 30] + [o.founded for o in p.founded_orgs] + [w.year for w in p.works])
        p.death = max(p.birth + rng.randint(52, 88), last_event + rng.randint(2, 12))
    for o in orgs:
        o.hq.hosted.append(o)
    return _World(regions, settlements, people, orgs, works, female_given + male_given)


# --------------------------------------------------------------------------- documents


def _pronouns(p: _Person) -> dict[str, str]:
    if p.female:
        return {"pron": "she", "Pron": "She", "poss": "her", "Poss": "Her", "obj": "her"}
    return {"pron": "he", "Pron": "He", "poss": "his", "Poss": "His", "obj": "him"}


def _person_text(p: _Person, world: _World, rng: random.Random) -> str:
    ya, yb, yc, yd, ye, yf = _years(rng, p.birth + 18, p.death - 2, 6)
    spouses = world.given_names[60:] if p.female else world.given_names[:60]
    slots = {
        **_pronouns(p), "name": p.name, "surname": p.family, "birth": p.birth, "death": p.death,
        "birthplace": p.birthplace.name, "bp_kind": p.birthplace.kind, "occupation": p.occupation,
        "a_occupation": _a(p.occupation), "occupations": p.occupations, "employer": p.employer.name,
        "a_adj_occupation": _a(f"{rng.choice(_VOCAB['person_adj'])} {p.occupation}"), "age": p.death - p.birth,
        "ya": ya, "yb": yb, "yc": yc, "yd": yd, "ye": ye, "yf": yf, "ypost": p.death + rng.randint(3, 10),
        "teen": rng.randint(11, 16), "spouse": rng.choice(spouses),
        "travel": rng.choice([s.name for s in rng.sample(world.settlements, min(3, len(world.settlements)))
                              if s is not p.birthplace] or [p.birthplace.name]),
        **_vocab(rng, num="num", num2="num", num3="num", parent_job="parent_job", parent_job2="parent_job",
                 talent="talent", talent2="talent", sibling_rank="sibling_rank", trait="trait", trait2="trait",
                 trait3="flaw", spouse_job="spouse_job"),
    }
    extra = [(1, rng.choice(_PERSON_FOUNDED).format_map({**slots, "org": o.name, "year": o.founded}))
             for o in p.founded_orgs]
    for w in sorted(p.works, key=lambda w: w.year)[:3]:
        _, verb, when, _, _ = _WORK_KINDS[w.kind]
        extra.append((1, rng.choice(_PERSON_WORK).format_map(
            {**slots, "verb": verb, "when": when, "kind": w.kind, "a_kind": _a(w.kind), "title": w.name,
             "year": w.year})))
    facts = _PERSON_FACTS + (_FOUNDER_EMPLOYER_FACTS if p.founded_orgs else _EMPLOYEE_FACTS)
    return _compose(rng, _PERSON_INTROS, facts, slots, extra, _PERSON_FILLERS,
                    ["birth", "occupation", "employer", "death"])


def _org_text(o: _Org, rng: random.Random) -> str:
    ya, yb, yc, yd, ye, yf = _years(rng, o.founded + 3, min(2015, o.founded + 160), 6)
    slots = {
        "name": o.name, "kindl": _anaphor(o.kind), "a_desc": _ORG_DESCRIPTORS[o.kind], "field": o.field_,
        "hq": o.hq.name, "founder": o.founder.name, "year": o.founded, "occupations": o.founder.occupations,
        "ya": ya, "yb": yb, "yc": yc, "yd": yd, "ye": ye, "yf": yf, "decade": f"{yb // 10 * 10}s",
        "pages": rng.randint(6, 40), "staff": rng.randrange(15, 400, 5),
        **_vocab(rng, num="num", emblem="emblem", venue="venue", periodical="periodical"),
    }
    extra = []
    if o.members:
        members = [m.name for m in rng.sample(o.members, min(3, len(o.members)))]
        were = "was" if len(members) == 1 else "were"
        extra.append((1, rng.choice(_ORG_MEMBERS).format(list=_join(members), were=were)))
    return _compose(rng, _ORG_INTROS, _ORG_FACTS, slots, extra, _ORG_FILLERS, ["founded", "founder", "hq", "field"])


def _work_text(w: _Work, world: _World, rng: random.Random) -> str:
    _, verb, when, _, family = _WORK_KINDS[w.kind]
    ya, yb, yc, yd = sorted(_years(rng, w.year + 5, min(2018, w.year + 180), 4))  # fillers stay chronological
    slots = {
        "title": w.name, "kind": w.kind, "a_kind": _a(w.kind), "a_style_kind": _a(f"{w.style} {w.kind}"),
        "creator": w.creator.name, "verb": verb, "when": when, "When": when.capitalize(), "year": w.year,
        "ya": ya, "yb": yb, "yc": yc, "yd": yd, "char": rng.choice(world.given_names),
        "minutes": rng.randrange(15, 150, 5), "pages": rng.randrange(90, 900, 10), "h": rng.randrange(30, 400, 5),
        "w": rng.randrange(30, 400, 5), "glyphs": rng.randrange(150, 600, 10), "count": rng.randint(20, 90),
        "coverage": rng.choice(_COVERAGE.get(w.kind, ["its subject in detail"])),
        **_vocab(rng, theme="theme", quality="quality", num="num", forces="forces", support="support",
                 scene="scene", char_job="char_job", setting="setting", setting2="setting"),
    }
    fillers = [(sec, t) for sec, fams, t in _WORK_FILLERS if fams == "*" or family in fams.split()]
    return _compose(rng, _WORK_INTROS, _WORK_FACTS, slots, [], fillers, ["creator", "year"])


def _settlement_text(s: _Place, rng: random.Random) -> str:
    ya = rng.randint(1840, 1910)  # railways
    yb, yc = _years(rng, max(s.founded + 20, 1700), 1990, 2)
    slots = {
        "name": s.name, "skind": s.kind, "a_skind": _a(s.kind),
        "a_adj_skind": _a(f"{rng.choice(_VOCAB['place_adj'])} {s.kind}"), "region": s.region.name,
        "river": s.river, "year": s.founded, "pop": f"{s.population:,}", "ya": ya, "yb": yb, "yc": yc,
        "yplague": rng.randint(s.founded + 10, 1720), "alt": rng.randrange(5, 900, 5),
        "century": _ORDINALS[(rng.randint(s.founded + 10, 1899) - 1) // 100 + 1],
        "century2": _ORDINALS[(rng.randint(max(s.founded + 10, 1601), 1899) - 1) // 100 + 1],
        **_vocab(rng, landmark="landmark", industry="industry", produce="produce", emblem="emblem",
                 tincture="tincture"),
    }
    extra = []
    if s.region.seat is s:
        extra.append((0, rng.choice(_SEAT_OF).format_map(slots)))
    if s.natives:
        names = [p.name for p in rng.sample(s.natives, min(3, len(s.natives)))]
        were = "was" if len(names) == 1 else "were"
        extra.append((2, rng.choice(_NATIVES).format(name=s.name, list=_join(names), were=were)))
    if s.hosted:
        orgs = ["the " + o.name for o in rng.sample(s.hosted, min(3, len(s.hosted)))]
        extra.append((2, rng.choice(_HOSTED).format(name=s.name, list=_join(orgs))))
    return _compose(rng, _SETTLEMENT_INTROS, _SETTLEMENT_FACTS, slots, extra, _SETTLEMENT_FILLERS,
                    ["region", "river", "founded", "population"])


def _region_text(r: _Place, rng: random.Random) -> str:
    ya, yb = _years(rng, 1780, 1990, 2)
    slots = {
        "name": r.name, "seat": r.seat.name, "area": f"{r.area:,}", "ya": ya, "yb": yb,
        "decade": f"{rng.randrange(1950, 2000, 10)}s", "peak": rng.randrange(200, 2400, 10),
        "century": rng.choice(["eighteenth", "nineteenth"]),
        **_vocab(rng, direction="direction", landscape="landscape", landscape2="landscape", num="num",
                 habitat="habitat"),
    }
    others = [s for s in r.settlements if s is not r.seat]
    extra = []
    if others:
        towns = _join([s.name for s in rng.sample(others, min(4, len(others)))])
        extra.append((1, rng.choice(_REGION_TOWNS).format(list=towns)))
    return _compose(rng, _REGION_INTROS, _REGION_FACTS, slots, extra, _REGION_FILLERS, ["seat", "area"])


# --------------------------------------------------------------------------- questions
# A question names exactly one entity (names are unique) and follows functional relations
# (one birthplace per person, one founder per organisation ...), so its answer is unique.
# Each candidate is (question, answer value, evidence chain of entities, answer stated last).


def _answers(value) -> tuple[list[str], list[str]]:
    """(answers, answer_keywords) for an answer value."""
    if isinstance(value, _Person):
        # The surname alone is a natural short answer, and still unique (surnames are unique).
        return [value.name, value.family], [value.family]
    if isinstance(value, _Org):
        return [value.name], [value.stem]
    if isinstance(value, _Place):
        return [value.name], [value.name]
    return [str(value)], [str(value)]


def _single_hop(e) -> list[tuple[str, object, list]]:
    if isinstance(e, _Person):
        qs = [(f"In what year was {e.name} born?", e.birth, [e]),
              (f"Where was {e.name} born?", e.birthplace, [e]),
              (f"What was {e.name}'s occupation?", e.occupation, [e])]
        if len(e.founded_orgs) <= 1:  # two foundations would make "worked for" ambiguous
            qs.append((f"Which organisation did {e.name} work for?", e.employer, [e]))
        return qs
    if isinstance(e, _Org):
        return [(f"In what year was the {e.name} founded?", e.founded, [e]),
                (f"Who founded the {e.name}?", e.founder, [e]),
                (f"Where is the {e.name} headquartered?", e.hq, [e])]
    if isinstance(e, _Work):
        _, verb, when, _, _ = _WORK_KINDS[e.kind]
        return [(f"Who {verb} the {e.kind} {e.name}?", e.creator, [e]),
                (f"In what year was the {e.kind} {e.name} {when}?", e.year, [e])]
    if e.kind == "region":
        return [(f"What is the administrative seat of the region of {e.name}?", e.seat, [e])]
    return [(f"On which river does {e.name} lie?", e.river, [e]),
            (f"In what year was {e.name} founded?", e.founded, [e]),
            (f"In which region is {e.name} located?", e.region, [e])]


def _two_hop(e) -> list[tuple[str, object, list]]:
    if isinstance(e, _Person):
        b, o = e.birthplace, e.employer
        return [(f"On which river does the birthplace of {e.name} lie?", b.river, [e, b]),
                (f"In which region was {e.name} born?", b.region, [e, b]),
                (f"Where is the organisation that {e.name} worked for headquartered?", o.hq, [e, o]),
                (f"In what year was the organisation that {e.name} worked for founded?", o.founded, [e, o]),
                (f"Who founded the organisation that {e.name} worked for?", o.founder, [e, o])]
    if isinstance(e, _Org):
        f, h = e.founder, e.hq
        return [(f"Where was the founder of the {e.name} born?", f.birthplace, [e, f]),
                (f"In what year was the founder of the {e.name} born?", f.birth, [e, f]),
                (f"In which region is the {e.name} headquartered?", h.region, [e, h]),
                (f"On which river does the town where the {e.name} has its headquarters lie?", h.river, [e, h])]
    if isinstance(e, _Work):
        role = _WORK_KINDS[e.kind][0]
        c = e.creator
        return [(f"Where was the {role} of {e.name} born?", c.birthplace, [e, c]),
                (f"In what year was the {role} of {e.name} born?", c.birth, [e, c]),
                (f"Which organisation did the {role} of {e.name} work for?", c.employer, [e, c])]
    if e.kind == "region":
        s = e.seat
        return [(f"On which river does the seat of {e.name} lie?", s.river, [e, s]),
                (f"In what year was the seat of {e.name} founded?", s.founded, [e, s])]
    r = e.region
    return [(f"What is the administrative seat of the region in which {e.name} lies?", r.seat, [e, r])]


# --------------------------------------------------------------------------- public API


def _check_args(n_entities, seed, source) -> None:
    if isinstance(n_entities, bool) or not isinstance(n_entities, int):
        raise ValueError(f"n_entities must be an int, got {n_entities!r}")
    if not MIN_ENTITIES <= n_entities <= MAX_ENTITIES:
        raise ValueError(f"n_entities must be between {MIN_ENTITIES} and {MAX_ENTITIES}, got {n_entities}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if not isinstance(source, str) or not source.strip():
        raise ValueError(f"source must be a non-empty string, got {source!r}")


def build_demo_corpus(n_entities: int = 240, seed: int = 7, source: str = "demo") -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (documents, items), conforming exactly to schemas.SOURCE_DOCUMENTS and schemas.SOURCE_ITEMS.

    One document per entity (doc ids ``{source}-0001`` ...), 150-400 words of encyclopedic
    prose (~300 cl100k tokens on average). Per entity one single-hop question and, where a
    chain exists whose answer cannot be read off the first document alone, one two-hop
    question (item ids ``{source}-q00001`` ...). ``evidence_doc_ids`` follows the chain, the
    document stating the answer last.
    """
    _check_args(n_entities, seed, source)
    rng = random.Random(seed)
    world = _build_world(n_entities, rng)

    entities: list = [*world.regions, *world.settlements, *world.people, *world.orgs, *world.works]
    rng.shuffle(entities)  # interleave the types, so any prefix of the corpus is mixed
    width = max(4, len(str(len(entities))))
    for i, e in enumerate(entities, 1):
        e.doc_id = f"{source}-{i:0{width}d}"
    for e in entities:
        if isinstance(e, _Person):
            e.text = _person_text(e, world, rng)
        elif isinstance(e, _Org):
            e.text = _org_text(e, rng)
        elif isinstance(e, _Work):
            e.text = _work_text(e, world, rng)
        elif e.kind == "region":
            e.text = _region_text(e, rng)
        else:
            e.text = _settlement_text(e, rng)

    docs = pl.DataFrame(
        {
            "doc_id": [e.doc_id for e in entities],
            "source": [source] * len(entities),
            "title": [e.name for e in entities],
            "text": [e.text for e in entities],
            "language": ["en"] * len(entities),
            "domain": [DOMAIN] * len(entities),
            "entity_type": [e.etype for e in entities],
        },
        schema=schemas.SOURCE_DOCUMENTS,
    )

    normalized: dict[str, str] = {}  # doc id -> normalized text, computed once per document

    def mentions(doc, answers: list[str]) -> bool:
        # The test of text.contains_answer, without re-normalizing the document per question.
        if doc.doc_id not in normalized:
            normalized[doc.doc_id] = _normalize_text(doc.text)
        return any(na and na in normalized[doc.doc_id] for na in map(normalize_answer, answers))

    rows: list[tuple] = []  # (task, category, hops, question, answers, keywords, evidence ids)
    for e in entities:
        question, value, chain = rng.choice(_single_hop(e))
        answers, keywords = _answers(value)
        rows.append(("single_hop_qa", "single-doc QA", 1, question, answers, keywords, [d.doc_id for d in chain]))
        candidates = _two_hop(e)
        for question, value, chain in rng.sample(candidates, len(candidates)):
            answers, keywords = _answers(value)
            # Only real two-hop questions: the answer must not already be readable in the
            # first document (e.g. a founder born in the town that hosts the society).
            if mentions(chain[0], answers):
                continue
            rows.append(("multi_hop_qa", "multi-doc QA", 2, question, answers, keywords, [d.doc_id for d in chain]))
            break

    qwidth = max(5, len(str(len(rows))))
    sep = "\x1f"  # list columns travel as joined strings: polars builds them far faster by splitting
    items = pl.DataFrame(
        {
            "item_id": [f"{source}-q{i:0{qwidth}d}" for i in range(1, len(rows) + 1)],
            "source": [source] * len(rows),
            "task": [r[0] for r in rows],
            "category": [r[1] for r in rows],
            "language": ["en"] * len(rows),
            "question": [r[3] for r in rows],
            "answers": [sep.join(r[4]) for r in rows],
            "answer_keywords": [sep.join(r[5]) for r in rows],
            "evidence_doc_ids": [sep.join(r[6]) for r in rows],
            "hops": [r[2] for r in rows],
            "all_classes": [[] for _ in rows],
            "confusing_facts": [[] for _ in rows],
        },
    ).with_columns(pl.col("answers", "answer_keywords", "evidence_doc_ids").str.split(sep))
    return schemas.conform(docs, "source_documents"), schemas.conform(items, "source_items")
