#!/usr/bin/env python3
"""Writes tiny-corpus.txt, the training text of the CPU examples and tests.

The text is composed by this script from its own word lists and sentence templates (no outside
source), so it is free of third-party rights: the OctoPipe authors dedicate it to the public
domain (CC0). It reads like a village almanac: short entries about weather, trades, travel and
small events, in plain English with enough repetition that a tiny byte-level model learns its
spelling and grammar within a few hundred steps. Deterministic: the same script always writes
the same bytes.

    python3 profiles/data/make_corpus.py            # writes profiles/data/tiny-corpus.txt
"""

import pathlib
import random

TARGET_BYTES = 120_000

PEOPLE = ["Anna", "Bram", "Clara", "Daniel", "Elsa", "Felix", "Greta", "Hugo", "Ida", "Jonas",
          "Katrin", "Lukas", "Mira", "Nils", "Olga", "Paul", "Rosa", "Simon", "Tilde", "Viktor"]
TRADES = ["baker", "miller", "smith", "weaver", "carpenter", "fisher", "potter", "shepherd",
          "teacher", "ferryman", "cooper", "beekeeper"]
PLACES = ["the mill", "the harbour", "the old bridge", "the market square", "the orchard",
          "the chapel", "the north field", "the forest edge", "the school house", "the inn",
          "the river bend", "the stone quarry"]
TOWNS = ["Ashford", "Brightwater", "Coldbrook", "Dunmore", "Eastwick", "Fairhaven", "Greenhill",
         "Highcliff"]
GOODS = ["flour", "wool", "salt", "apples", "timber", "honey", "cheese", "rope", "candles",
         "barley", "nails", "linen"]
ANIMALS = ["goats", "geese", "sheep", "hens", "horses", "cows", "bees", "ducks"]
WEATHER = ["a cold wind from the north", "steady rain until noon", "fog over the river",
           "a clear and bright sky", "heavy snow in the hills", "warm sun and a light breeze",
           "thunder in the evening", "frost on the fields at dawn"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
NUMBERS = ["two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "twelve"]
ADJ = ["quiet", "busy", "long", "short", "cheerful", "tiring", "strange", "pleasant", "windy",
       "peaceful"]
FEELINGS = ["glad", "tired", "worried", "proud", "curious", "hopeful", "surprised", "content"]
TOOLS = ["hammer", "saw", "ladder", "basket", "lantern", "spade", "net", "cart"]

TEMPLATES = [
    "The day began with {weather}.",
    "{person} the {trade} went to {place} early in the morning.",
    "At {place}, {person} sold {number} sacks of {good} to a trader from {town}.",
    "{person} said that the {good} from {town} was better than last year.",
    "It was a {adj} day, and most people stayed close to home.",
    "In the afternoon the {animals} were brought in from the north field.",
    "{person} borrowed a {tool} from {person2} and promised to return it by {day}.",
    "The road to {town} was muddy, so the cart took {number} hours instead of two.",
    "{person} felt {feeling} when the letter from {town} finally arrived.",
    "Children from the school house counted {number} {animals} by the river bend.",
    "The price of {good} rose again, and {person} the {trade} complained about it.",
    "After supper {person} and {person2} talked about the harvest and the weather.",
    "A traveller from {town} asked the way to {place}, and {person} showed him.",
    "The {trade} worked late, because the order of {good} had to be ready by {day}.",
    "By evening there was {weather}, and the lamps were lit in every window.",
    "{person} wrote in the ledger: {number} sacks of {good}, paid in full.",
    "Nobody could remember a {month} as {adj} as this one.",
    "On {day} the market opened at seven, and {good} sold out before noon.",
    "{person} fixed the roof of the {trade}'s shed with a borrowed {tool}.",
    "The ferry crossed the river {number} times, carrying {good} and {animals}.",
]

SAYINGS = [
    "A full barn in autumn is worth a song in spring.",
    "Mend the fence before the goats find the gap.",
    "The river keeps no secrets from the miller.",
    "Count the sacks twice and the coins once.",
    "Rain at dawn, sun by noon; rain at dusk, rain till June.",
    "A borrowed ladder climbs no higher than your own.",
]


def sentence(rng: random.Random) -> str:
    person, person2 = rng.sample(PEOPLE, 2)
    return rng.choice(TEMPLATES).format(
        weather=rng.choice(WEATHER), person=person, person2=person2, trade=rng.choice(TRADES),
        place=rng.choice(PLACES), town=rng.choice(TOWNS), good=rng.choice(GOODS),
        animals=rng.choice(ANIMALS), number=rng.choice(NUMBERS), adj=rng.choice(ADJ),
        feeling=rng.choice(FEELINGS), tool=rng.choice(TOOLS), day=rng.choice(DAYS),
        month=rng.choice(MONTHS))


def entry(rng: random.Random, index: int) -> str:
    month = MONTHS[(index // 28) % 12]
    day = index % 28 + 1
    lines = [f"{DAYS[index % 7]}, {day} {month}."]
    body = [sentence(rng) for _ in range(rng.randint(3, 6))]
    if rng.random() < 0.25:
        body.append("As the old saying goes: " + rng.choice(SAYINGS))
    lines.append(" ".join(body))
    return "\n".join(lines)


def main() -> None:
    rng = random.Random(20240611)
    parts = ["THE ALMANAC OF A RIVER VILLAGE\n"
             "Written for OctoPipe's examples. Dedicated to the public domain (CC0).\n"]
    size = len(parts[0])
    index = 0
    while size < TARGET_BYTES:
        text = entry(rng, index) + "\n"
        parts.append(text)
        size += len(text) + 1
        index += 1
    out = pathlib.Path(__file__).with_name("tiny-corpus.txt")
    out.write_text("\n".join(parts), encoding="ascii")
    print(f"wrote {out} ({out.stat().st_size} bytes, {index} entries)")


if __name__ == "__main__":
    main()
