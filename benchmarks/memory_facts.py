"""The question sets of ``memory_qa.py`` and ``chitchat.py`` (data only).

* :data:`FACTS`: things people tell an assistant once and ask about weeks
  later (codes, names, dates, places, allergies, decisions), in English and
  Chinese/Japanese.  Each has the sentence the user says, the question asked
  in a new session, and the accepted answers.  Values were picked so that a
  model cannot guess them (no "peanuts", no "1234"): an answer that contains
  one was recalled, not invented.
* :data:`UNRELATED`: questions that nothing in the planted memory answers
  (general knowledge, programming, arithmetic) and that avoid the topics of
  the LoCoMo conversations; a recall block for them is a false injection.
* :data:`CHITCHAT`: greetings, thanks and small talk in English, German and
  Chinese, which should be answered at once, without a tool call.
* :data:`STATEMENTS`: things the user tells (not asks) in a new session that
  touch a planted fact: said again, or a related topic.
* :data:`HELDOUT_FACTS` / :data:`HELDOUT_UNRELATED`: written after the floor
  was fixed, never used to tune it.
* :data:`NAMED_FACTS` / :data:`NAMED_UNRELATED`: people in the user's life
  asked about by name ("What is Ana allergic to?"), and general questions
  that name people and places.

The lists are ordered so that every prefix mixes kinds and languages: the
``--quick`` and ``--facts N`` runs take the first N.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

Accepted = tuple[str | tuple[str, ...], ...]
"""Alternatives; a tuple alternative matches when all of its parts occur."""


@dataclass(frozen=True, slots=True)
class Fact:
    key: str
    said: str
    """What the user says, once, in an earlier conversation."""
    question: str
    accept: Accepted
    kind: str
    lang: str


def normalise(text: str) -> str:
    """Case-, width- and punctuation-blind form: ``"KL 884-120"`` → ``"kl884120"``.

    NFKC folds full-width digits and letters (``４７２１`` → ``4721``), so a
    CJK answer is compared like an English one.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\W_]+", "", folded)


def answer_matches(answer: str, accept: Accepted) -> bool:
    """Whether the normalised answer contains one accepted alternative."""
    norm = normalise(answer)
    for alternative in accept:
        parts = (alternative,) if isinstance(alternative, str) else alternative
        if all(normalise(part) in norm for part in parts):
            return True
    return False


FACTS: tuple[Fact, ...] = (
    Fact(
        "bike-lock",
        "By the way, my bike lock code is 4721.",
        "What is my bike lock code?",
        ("4721",),
        "code",
        "en",
    ),
    Fact(
        "bike-lock-zh",
        "对了，我的电动车锁密码是6083。",
        "我的电动车锁密码是多少？",
        ("6083",),
        "code",
        "zh",
    ),
    Fact(
        "dentist",
        "My new dentist is called Dr. Okafor, her practice is near the station.",
        "What is the name of my dentist?",
        ("okafor",),
        "name",
        "en",
    ),
    Fact(
        "allergy-zh",
        "我对青霉素过敏，医生开药的时候要提醒他们。",
        "我对什么药过敏？",
        ("青霉素",),
        "allergy",
        "zh",
    ),
    Fact(
        "passport",
        "Note to self: my passport expires on 14 March 2027.",
        "When does my passport expire?",
        (("2027", "march", "14"), ("2027", "03", "14"), ("2027", "3月14")),
        "date",
        "en",
    ),
    Fact(
        "spare-key",
        "I hid the spare house key under the blue flower pot by the back door.",
        "Where is my spare house key?",
        ("flowerpot", "bluepot"),
        "place",
        "en",
    ),
    Fact(
        "cat-zh",
        "我们家新来的小猫叫年糕。",
        "我们家的新猫叫什么名字？",
        ("年糕",),
        "name",
        "zh",
    ),
    Fact(
        "nursery",
        "We decided to paint the nursery sage green.",
        "What colour did we decide on for the nursery?",
        ("sage",),
        "decision",
        "en",
    ),
    Fact(
        "wifi",
        "The wifi password at my parents' house is bluefinch42.",
        "What's the wifi password at my parents' house?",
        ("bluefinch42",),
        "code",
        "en",
    ),
    Fact(
        "kiwi",
        "I'm allergic to kiwi fruit, so please keep that in mind for recipes.",
        "Which fruit am I allergic to?",
        ("kiwi",),
        "allergy",
        "en",
    ),
    Fact(
        "wedding-zh",
        "我们决定把婚礼定在杭州西湖边办。",
        "我们的婚礼决定在哪里办？",
        ("杭州", "西湖"),
        "decision",
        "zh",
    ),
    Fact(
        "locker-ja",
        "ジムのロッカー番号は527番です。",
        "ジムのロッカー番号は何番ですか？",
        ("527",),
        "code",
        "ja",
    ),
    Fact(
        "landlord",
        "My landlord's name is Mrs. Haverford, she lives upstairs.",
        "What is my landlord's name?",
        ("haverford",),
        "name",
        "en",
    ),
    Fact(
        "camper",
        "I parked the camper van at the Lakeside storage yard on Birch Road.",
        "Where did I park the camper van?",
        ("birch", "lakeside"),
        "place",
        "en",
    ),
    Fact(
        "passport-zh",
        "我的护照号码是E39271846。",
        "我的护照号码是多少？",
        ("e39271846",),
        "code",
        "zh",
    ),
    Fact(
        "sesame",
        "My son is allergic to sesame, we found out last week.",
        "What is my son allergic to?",
        ("sesame",),
        "allergy",
        "en",
    ),
    Fact(
        "lyon",
        "I've decided to take the train to Lyon instead of flying.",
        "How did I decide to travel to Lyon?",
        ("train",),
        "decision",
        "en",
    ),
    Fact(
        "mum-birthday-zh",
        "我妈妈的生日是十月三号。",
        "我妈妈的生日是哪天？",
        ("十月三", "10月3", ("october", "3")),
        "date",
        "zh",
    ),
    Fact(
        "flyer",
        "My frequent flyer number is KL 884 120 57.",
        "What is my frequent flyer number?",
        ("88412057",),
        "code",
        "en",
    ),
    Fact(
        "piano",
        "My daughter's piano teacher is Ms. Lindqvist.",
        "Who is my daughter's piano teacher?",
        ("lindqvist",),
        "name",
        "en",
    ),
    Fact(
        "parking-zh",
        "我的車位在地下二層，47號。",
        "我的車位是幾號？",
        ("47",),
        "place",
        "zh",
    ),
    Fact(
        "database",
        "For the inventory project we chose Postgres over MySQL.",
        "Which database did we choose for the inventory project?",
        ("postgres",),
        "decision",
        "en",
    ),
    Fact(
        "blood",
        "My blood type is B negative.",
        "What is my blood type?",
        ("bneg",),
        "health",
        "en",
    ),
    Fact(
        "spanish-zh",
        "我决定下个月开始学西班牙语。",
        "我决定下个月开始学什么语言？",
        ("西班牙",),
        "decision",
        "zh",
    ),
    Fact(
        "car-service",
        "My car's next service is booked for 9 September.",
        "When is my car's next service?",
        (("september", "9"), ("sep", "9"), ("9月9",)),
        "date",
        "en",
    ),
    Fact(
        "tax-docs",
        "I keep my tax documents in the grey filing cabinet, second drawer.",
        "Where do I keep my tax documents?",
        ("filingcabinet", "seconddrawer"),
        "place",
        "en",
    ),
    Fact(
        "teacher-zh",
        "我女儿的班主任叫周明华。",
        "我女儿的班主任叫什么名字？",
        ("周明华",),
        "name",
        "zh",
    ),
    Fact(
        "library-pin",
        "My library card PIN is 9052.",
        "What is my library card PIN?",
        ("9052",),
        "code",
        "en",
    ),
    Fact(
        "shoe",
        "I wear shoe size 44, in case you ever order shoes for me.",
        "What shoe size do I wear?",
        ("44",),
        "number",
        "en",
    ),
    Fact(
        "plumber",
        "The plumber is coming on Thursday at 8 am to fix the boiler.",
        "When is the plumber coming?",
        ("thursday",),
        "date",
        "en",
    ),
    Fact(
        "key-zh",
        "我把备用钥匙放在鞋柜最上面的抽屉里了。",
        "我的备用钥匙放在哪儿了？",
        ("鞋柜",),
        "place",
        "zh",
    ),
    Fact(
        "neighbour-dog",
        "Our neighbour's dog is called Biscuit, he barks at the postman.",
        "What is our neighbour's dog called?",
        ("biscuit",),
        "name",
        "en",
    ),
)

UNRELATED: tuple[str, ...] = (
    "What is the capital of Australia?",
    "一公里等于多少米？",
    "Write a Python function that reverses a string.",
    "What does HTTP status 404 mean?",
    "Wie viele Minuten hat ein Tag?",
    "How do I convert Celsius to Fahrenheit?",
    "请解释一下什么是递归。",
    "Who wrote Pride and Prejudice?",
    "How do I undo the last git commit?",
    "What is the square root of 144?",
    "Explain the difference between a list and a tuple in Python.",
    "水的化学式是什么？",
    "How many days are in a leap year?",
    "What is a prime number?",
    "Give me a regular expression that matches an email address.",
    "What does CPU stand for?",
    "Was ist die Hauptstadt von Kanada?",
    "How do I sort a dictionary by value in Python?",
    "What is the speed of light in a vacuum?",
    "Python 里怎么读取 JSON 文件？",
    "Explain recursion in one sentence.",
    "What's the difference between RAM and disk storage?",
    "What is 17 times 23?",
    "How do I center a div in CSS?",
    "太阳系有几颗行星？",
    "In which year did the first moon landing happen?",
    "How many centimetres are in an inch?",
    "Translate 'good morning' into French.",
    "What is the boiling point of water at sea level in Fahrenheit?",
    "What does the SQL keyword JOIN do?",
)

CHITCHAT: tuple[str, ...] = (
    "Hi!",
    "Hallo!",
    "你好！",
    "Good morning!",
    "Danke schön!",
    "谢谢你！",
    "Hello, how are you today?",
    "Guten Morgen, wie geht's?",
    "最近怎么样？",
    "Thanks a lot!",
    "Vielen Dank für deine Hilfe.",
    "早上好！",
    "Thank you, that was helpful.",
    "Na, alles klar bei dir?",
    "晚安。",
    "How's it going?",
    "Schönen Abend noch!",
    "辛苦了，谢谢。",
    "Nice to meet you.",
    "Have a great evening!",
)


# -- statements ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Statement:
    """Something the user tells in a new session that touches a planted fact.

    ``repeat``: the fact said again, in other words (the user introducing
    themself twice).  ``related``: the same topic with something new, where
    the remembered fact could make the answer better ("I locked myself out"
    when the spare key's place is known).  Used by ``statement_echo.py``.
    """

    fact: str
    """The key of the :data:`FACTS` entry it touches."""
    text: str
    kind: str
    shows: Accepted = ()
    """For ``related``: what in an answer shows the remembered fact was used."""


STATEMENTS: tuple[Statement, ...] = (
    Statement("spare-key", "I locked myself out of the house again.", "related", ("flower pot",)),
    Statement("blood", "Just so you know, my blood type is B negative.", "repeat"),
    Statement("cat-zh", "我们家的小猫今天把花瓶打碎了。", "related", ("年糕",)),
    Statement("dentist", "I have a dentist appointment tomorrow morning.", "related", ("Okafor",)),
    Statement("shoe", "Remember, my shoe size is 44.", "repeat"),
    Statement("kiwi", "I want to make a fruit salad tonight.", "related", ("allerg",)),
    Statement("bike-lock-zh", "我的电动车锁密码还是6083，别忘了。", "repeat"),
    Statement("wifi", "I'm visiting my parents this weekend.", "related", ("bluefinch",)),
    Statement("landlord", "The heating in my flat is broken again.", "related", ("Haverford",)),
    Statement("passport", "I'm planning a trip to Canada next summer.", "related", ("2027",)),
    Statement("piano", "My daughter has her piano lesson today.", "related", ("Lindqvist",)),
    Statement("library-pin", "My library card PIN is still 9052.", "repeat"),
    Statement(
        "sesame", "I'm baking bread for my son's class party.", "related", (("sesame", "allerg"),)
    ),
    Statement("mum-birthday-zh", "我在想给妈妈买什么生日礼物。", "related", ("十月三", "10月3")),
    Statement("lyon", "I'm packing for my trip to Lyon.", "related", ("train",)),
    Statement("neighbour-dog", "Our neighbour's dog Biscuit barked all night.", "repeat"),
    Statement("flyer", "I'm booking a flight to Amsterdam for work.", "related", ("884 120 57",)),
    Statement("spanish-zh", "我今天买了一本西班牙语课本。", "related", ("下个月",)),
    Statement("plumber", "The boiler is making strange noises again.", "related", ("Thursday",)),
    Statement("dentist", "My dentist is Dr. Okafor, near the station.", "repeat"),
    Statement("car-service", "My car is making a rattling noise.", "related", ("September",)),
    Statement("database", "We're setting up Postgres for the inventory project today.", "repeat"),
    Statement(
        "nursery", "We're buying paint for the nursery this weekend.", "related", ("sage green",)
    ),
    Statement("landlord", "My landlord Mrs. Haverford came by today.", "repeat"),
)

# -- held out ------------------------------------------------------------------------------
# Written after the recall floor was fixed and never used to tune it: recall_floor.py
# --heldout scores the shipped floor on these only.  The questions are phrased less like
# the sentence the user said than in FACTS (other words for the same thing).
HELDOUT_FACTS: tuple[Fact, ...] = (
    Fact(
        "locker",
        "My gym locker is number 318, the one next to the sauna.",
        "Which locker do I use at the gym?",
        ("318",),
        "code",
        "en",
    ),
    Fact(
        "mechanic-zh",
        "我的修车师傅姓庞，他的店在南门外。",
        "给我修车的师傅姓什么？",
        ("庞",),
        "name",
        "zh",
    ),
    Fact(
        "blood-type",
        "For the record, my blood type is AB negative.",
        "What's my blood group?",
        (("ab", "neg"), "ab-", "ab−"),
        "health",
        "en",
    ),
    Fact(
        "anniversary",
        "Our wedding anniversary is on the 9th of October.",
        "When is our anniversary?",
        (("9", "october"), ("9", "oct"), "10-09", "10/09", "09.10"),
        "date",
        "en",
    ),
    Fact(
        "plant-ja",
        "ベランダのレモンの木は水曜日に水をやることにしている。",
        "レモンの木にはいつ水をやりますか？",
        ("水曜",),
        "decision",
        "ja",
    ),
    Fact(
        "printer",
        "The office printer's admin PIN is 5590.",
        "What PIN do I need for the office printer?",
        ("5590",),
        "code",
        "en",
    ),
    Fact(
        "sister-city",
        "My sister Ilse moved to Tromsø last spring.",
        "Where does my sister live now?",
        ("tromsø", "tromso"),
        "place",
        "en",
    ),
    Fact(
        "shellfish-zh",
        "我吃虾会起疹子，点菜的时候别点虾。",
        "我吃什么会起疹子？",
        ("虾",),
        "allergy",
        "zh",
    ),
    Fact(
        "tutor",
        "The kids' piano teacher is Mr. Vasquez-Lund, lessons on Thursdays.",
        "Who teaches the kids piano?",
        ("vasquez",),
        "name",
        "en",
    ),
    Fact(
        "car-plate",
        "My car's number plate is GZ-417-KT.",
        "What's the registration of my car?",
        (("gz", "417", "kt"),),
        "code",
        "en",
    ),
    Fact(
        "holiday-decision",
        "We settled on Madeira for the summer holiday, not Crete.",
        "Where did we decide to go for the summer holiday?",
        ("madeira",),
        "decision",
        "en",
    ),
    Fact(
        "doctor-zh",
        "我的家庭医生是欧阳大夫，每周二上午出诊。",
        "我的家庭医生是谁？",
        ("欧阳",),
        "name",
        "zh",
    ),
    Fact(
        "storage-unit",
        "The storage unit we rent is at Harbour Lane, unit C-12.",
        "Which unit is our storage space?",
        ("c-12", "c12"),
        "place",
        "en",
    ),
    Fact(
        "coffee",
        "I switched to oat milk in my coffee, cow's milk upsets my stomach.",
        "What milk do I take in my coffee?",
        ("oat",),
        "preference",
        "en",
    ),
    Fact(
        "insurance",
        "My health insurance number is KV-88213-04.",
        "What is my health insurance number?",
        ("88213",),
        "code",
        "en",
    ),
    Fact(
        "birthday-zh",
        "我女儿的生日是五月二十日。",
        "我女儿哪天过生日？",
        ("五月二十", "5月20"),
        "date",
        "zh",
    ),
)

HELDOUT_UNRELATED: tuple[str, ...] = (
    "What is the tallest mountain in Africa?",
    "How do I make a Python virtual environment?",
    "一年有多少个星期？",
    "What's the plural of 'cactus'?",
    "Explain what a hash table is.",
    "Wie spät ist es in Tokio, wenn es in Berlin Mittag ist?",
    "How many bones are in the adult human body?",
    "What does the 'chmod 755' command do?",
    "光合作用需要什么条件？",
    "Convert 5 miles to kilometres.",
    "What is the derivative of x squared?",
    "Who painted the Mona Lisa?",
    "What is the difference between TCP and UDP?",
    "How do I reverse a list in JavaScript?",
    "月球绕地球一圈要多久？",
    "What causes the seasons on Earth?",
    "Name three noble gases.",
    "What is 2 to the power of 10?",
    "How do I write a for loop in Bash?",
    "What does 'et cetera' mean?",
    # Near the LoCoMo conversations' topics (family, painting, running, pets, books): the
    # planted sessions talk about these, so a block here is the hardest kind of false hit.
    "What are some good tips for a beginner painter?",
    "How often should a dog be walked?",
    "Can you recommend a classic novel to read?",
    "How do I train for my first 10k run?",
    "What should I pack for a camping trip?",
    "How can I help a friend who is going through a hard time?",
    "What's a good way to learn to play the guitar?",
    "How do I start a vegetable garden?",
    "What are the benefits of volunteering?",
    "How do I prepare for a job interview?",
)

NAMED_FACTS: tuple[Fact, ...] = (
    Fact(
        "ana-allergy",
        "One more thing: my sister Ana is allergic to celery, so no soup with it for her.",
        "What is Ana allergic to?",
        ("celery",),
        "allergy",
        "en",
    ),
    Fact(
        "tom-birthday",
        "Tom's birthday is on 3 October, he turns forty this year.",
        "When is Tom's birthday?",
        (("october", "3"), ("10", "3")),
        "date",
        "en",
    ),
    Fact(
        "priya-job",
        "Priya just started as a nurse at the Royal Infirmary.",
        "Where does Priya work?",
        ("infirmary",),
        "place",
        "en",
    ),
    Fact(
        "jonas-coffee",
        "Jonas always takes his coffee with a pinch of cardamom.",
        "How does Jonas take his coffee?",
        ("cardamom",),
        "preference",
        "en",
    ),
    Fact(
        "lukas-diet",
        "Lukas is pescatarian, keep that in mind for the barbecue.",
        "What diet does Lukas follow?",
        ("pescatarian",),
        "preference",
        "en",
    ),
    Fact(
        "otto-batteries",
        "Grandpa Otto's hearing aid takes size 312 batteries.",
        "Which batteries does Otto's hearing aid need?",
        ("312",),
        "code",
        "en",
    ),
    Fact(
        "maria-flight",
        "Maria's flight from Madrid lands at 14:35 on Friday.",
        "When does Maria's flight land?",
        ("1435", "235"),
        "date",
        "en",
    ),
    Fact(
        "chloe-rate",
        "Our babysitter Chloe charges 17 euros an hour.",
        "How much does Chloe charge per hour?",
        ("17",),
        "code",
        "en",
    ),
    Fact(
        "ben-shoes",
        "Ben's shoe size is 34 now, he grows so fast.",
        "What shoe size does Ben wear?",
        ("34",),
        "code",
        "en",
    ),
    Fact(
        "sabine-room",
        "Meine Kollegin Sabine sitzt jetzt in Raum 4.12.",
        "In welchem Raum sitzt Sabine?",
        ("412",),
        "place",
        "de",
    ),
    Fact(
        "mia-antibiotics",
        "Dr. Meyer said Mia should take the antibiotics for twelve days.",
        "How long should Mia take the antibiotics?",
        ("twelve", "12"),
        "date",
        "en",
    ),
    Fact(
        "xiaolin-birthday-zh",
        "小林的生日是五月三号。",
        "小林的生日是哪天？",
        ("五月三", "5月3"),
        "date",
        "zh",
    ),
)
"""Facts about people in the user's life, asked by name without "my": "What is
Ana allergic to?".  Written after the floor was fixed (2026-12-02), when the
window answered that question with an invented allergy: nothing in the other
sets asks about someone by name."""

NAMED_UNRELATED: tuple[str, ...] = (
    "Who wrote Pride and Prejudice?",
    "When did Napoleon die?",
    "What language do they speak in Brazil?",
    "How tall is the Eiffel Tower?",
    "Who was Ada Lovelace?",
    "What is Tokyo famous for?",
    "Where is Mount Kilimanjaro?",
    "Was hat Goethe geschrieben?",
    "How old was Mozart when he died?",
    "Who is Sherlock Holmes?",
    "What did Marie Curie discover?",
    "Wann beginnt der Sommer in Deutschland?",
    "Is Python or Java better for beginners?",
    "What is the population of Canada?",
    "Who painted The Starry Night?",
    "How do I get from London to Paris by train?",
    "What does NASA do?",
    "Why is the Dead Sea so salty?",
    "Was ist die Hauptstadt von Österreich?",
    "Who founded Microsoft?",
)
"""General questions that name people, places and works: a floor that trusts
capitalised names must not recall the user's own lines for these."""

# -- facts never told ------------------------------------------------------------------------
UNKNOWN_FACTS: tuple[str, ...] = (
    "What is my daughter's name?",
    "When is my wife's birthday?",
    "What's the code for my garage door?",
    "Which hotel did I book in Lisbon?",
    "Where did I park my car this morning?",
    "How old is my son?",
    "What's my brother's phone number?",
    "Who is my family doctor?",
    "What is my employee ID?",
    "Which gym am I a member of?",
    "我女儿叫什么名字？她的生日是哪天？",
    "我老婆的生日是哪天？",
    "我住在哪个城市？",
    "我的车停在哪里？",
    "我儿子几岁了？",
    "Wie lautet mein WLAN-Passwort im Büro?",
    "Wann hat meine Mutter Geburtstag?",
    "Wo arbeitet mein Bruder?",
    "私の上司の名前は何ですか？",
    "私の娘の名前は何ですか？",
)
"""Questions about the user's own life whose answer was never told (``unknown_facts.py``).

None of them is about a fact of :data:`FACTS`, so the honest answer is "I don't know".
(Until 2026-12-02 06:10 UTC the 19th was 私の血液型は何ですか？, which :data:`FACTS` answers
in English — "My blood type is B negative." — found once questions were translated.)"""

OWN_ADVICE: tuple[str, ...] = (
    "How can I improve my sleep?",
    "What should I cook for my kids tonight?",
    "How do I fix a flat tyre on my bike?",
    "Can you suggest a name for my new puppy?",
    "What's a good birthday gift for my wife?",
    "How do I tell my boss I need a day off?",
    "我怎么才能提高我的英语口语？",
    "Wie kann ich meine Wohnung energiesparender machen?",
    "What are some ways to keep my plants alive in winter?",
    "Which exercises help my back pain?",
)
"""Questions in the first person that ask for help, not for a remembered fact."""

OWN_MATERIAL: tuple[str, ...] = (
    "What is wrong with my code?\n```python\ndef add(a, b):\n    return a - b\n```",
    "What's wrong with my essay? It's about climate change and it's too long.",
    "What is the time complexity of my function? def f(n): return sum(range(n))",
    "Which of my two options is cheaper: renting at 900 a month or buying at 200k?",
    "How long will my 5 kg turkey take to roast?",
    "How many calories are in my lunch: a banana and two eggs?",
    "What is my BMI if I'm 180 cm and 80 kg?",
    "What is 15% of my salary of 4000?",
    "What's a good name for my new bakery? It sells sourdough and pastries.",
    "My flight lands at 14:05 and the train leaves at 15:00. How much time do I have for my "
    "transfer?",
    "Who wrote the book my friend gave me, 'Dune'?",
    "What language is my code written in? print('hi')",
)
"""Questions about the user's things that bring what they ask about (code, figures, a list):
they ask for work on it, not for a remembered fact."""

# -- told in English, asked in another language ---------------------------------------------
CROSS_FACTS: tuple[Fact, ...] = (
    Fact(
        "bike-lock-x",
        "By the way, my bike lock code is 4721.",
        "我的自行车锁密码是多少？",
        ("4721",),
        "code",
        "zh",
    ),
    Fact(
        "dentist-x",
        "My new dentist is called Dr. Okafor, her practice is near the station.",
        "Wie heißt meine Zahnärztin?",
        ("okafor",),
        "name",
        "de",
    ),
    Fact(
        "passport-x",
        "Note to self: my passport expires on 14 March 2027.",
        "我的护照什么时候过期？",
        ("2027",),
        "date",
        "zh",
    ),
    Fact(
        "landlord-x",
        "My landlord's name is Mrs. Haverford, she lives upstairs.",
        "我的房东叫什么名字？",
        ("haverford",),
        "name",
        "zh",
    ),
    Fact(
        "blood-x",
        "My blood type is B negative.",
        "私の血液型は何ですか？",
        ("bneg", "b型", "brh"),
        "code",
        "ja",
    ),
    Fact(
        "library-pin-x",
        "My library card PIN is 9052.",
        "Wie lautet die PIN meiner Bibliothekskarte?",
        ("9052",),
        "code",
        "de",
    ),
    Fact(
        "shoe-x",
        "I wear shoe size 44, in case you ever order shoes for me.",
        "我穿多大码的鞋？",
        ("44",),
        "code",
        "zh",
    ),
    Fact(
        "car-service-x",
        "My car's next service is booked for 9 September.",
        "Wann ist der nächste Service für mein Auto?",
        ("9",),
        "date",
        "de",
    ),
    Fact(
        "piano-x",
        "My daughter's piano teacher is Ms. Lindqvist.",
        "我女儿的钢琴老师叫什么名字？",
        ("lindqvist",),
        "name",
        "zh",
    ),
    Fact(
        "camper-x",
        "I parked the camper van at the Lakeside storage yard on Birch Road.",
        "Wo habe ich das Wohnmobil geparkt?",
        ("birch", "lakeside"),
        "place",
        "de",
    ),
)
"""Facts told in English and asked in Chinese, German or Japanese (``memory_qa.py --cross``):
what a user who writes in two languages does.  The accepted strings are the ones an
answer in any language keeps (digits, names)."""

# -- told in another language, asked in English ----------------------------------------------
REVERSE_FACTS: tuple[Fact, ...] = (
    Fact(
        "gym-r",
        "我的健身房储物柜密码是3958。",
        "What is my gym locker code?",
        ("3958",),
        "code",
        "en",
    ),
    Fact(
        "coach-r",
        "我儿子的足球教练叫Marco，每周六训练。",
        "What is my son's football coach called?",
        ("marco",),
        "name",
        "en",
    ),
    Fact(
        "plate-r",
        "我的车牌号是沪A7K219。",
        "What is my car's licence plate?",
        ("7k219",),
        "code",
        "en",
    ),
    Fact(
        "wifi-r",
        "我家的无线网密码是lotus-river-88。",
        "What is the Wi-Fi password at my home?",
        ("lotusriver88",),
        "code",
        "en",
    ),
    Fact(
        "insurance-r",
        "我的医保卡号是H27730915。",
        "What is my health insurance card number?",
        ("h27730915",),
        "code",
        "en",
    ),
    Fact(
        "vet-r",
        "我们家的狗看的兽医是Dr. Brandt。",
        "Who is our dog's vet?",
        ("brandt",),
        "name",
        "en",
    ),
    Fact(
        "bike-r",
        "私の自転車の鍵の番号は6614です。",
        "What is my bike lock number?",
        ("6614",),
        "code",
        "en",
    ),
    Fact(
        "teacher-r",
        "私の娘のピアノの先生はHolm先生です。",
        "Who is my daughter's piano teacher?",
        ("holm",),
        "name",
        "en",
    ),
    Fact(
        "locker-r",
        "Mein Spind im Büro hat die Nummer 318, ich vergesse das immer.",
        "What number is my locker at the office?",
        ("318",),
        "code",
        "en",
    ),
    Fact(
        "dog-r",
        "Der Hund meiner Schwester heißt Fridolin und ist sehr verspielt.",
        "What is my sister's dog called?",
        ("fridolin",),
        "name",
        "en",
    ),
)
"""Facts told in Chinese, Japanese or German and asked in English (``memory_qa.py
--reverse``); the accepted strings survive any answer language (digits, Latin names)."""

# -- several facts in one message ------------------------------------------------------------
MULTI_FACTS: tuple[Fact, ...] = (
    Fact(
        "intro-m",
        "Hi, I'm Tomas. I work as a baker in Brno and my daughter Eva turns 7 on 14 March.",
        "When is my daughter's birthday?",
        (("14", "march"),),
        "date",
        "en",
    ),
    Fact(
        "move-m",
        "Quick update: we moved to Ghent last month, my new office is on Veldstraat, "
        "and the kids started at De Regenboog school.",
        "Which school do my kids go to?",
        ("regenboog",),
        "place",
        "en",
    ),
    Fact(
        "diet-m",
        "My partner Sam is vegetarian, my mum can't eat gluten, and I'm trying to cut sugar.",
        "What can't my mum eat?",
        ("gluten",),
        "allergy",
        "en",
    ),
    Fact(
        "bank-m",
        "I'm 34, I run a small bike repair shop, and my bank is Triodos.",
        "Which bank do I use?",
        ("triodos",),
        "name",
        "en",
    ),
    Fact(
        "family-m",
        "My sister Ines lives in Porto, my brother works at Siemens, and my parents "
        "retired to Faro.",
        "Where did my parents retire to?",
        ("faro",),
        "place",
        "en",
    ),
    Fact(
        "car-m",
        "Before I forget: the car is due for inspection in June, the insurance renews "
        "on 2 May, and my licence expires in 2029.",
        "When does my car insurance renew?",
        (("2", "may"),),
        "date",
        "en",
    ),
    Fact(
        "cello-m",
        "I play the cello, I sing in the Collegium choir on Wednesdays, and my teacher "
        "is Mrs. Okonkwo.",
        "Who is my cello teacher?",
        ("okonkwo",),
        "name",
        "en",
    ),
    Fact(
        "son-m",
        "My son Leo is 9, he loves chess, and his best friend is called Anouk.",
        "What is my son's best friend called?",
        ("anouk",),
        "name",
        "en",
    ),
)
"""Facts told several to a message, as people introduce themselves, asked one at a time
(``unknown_facts.py --sets multi``): far in meaning from a question about one of them,
they pass recall's floor on a few shared words (benchmarks/RESULTS.md §12)."""
