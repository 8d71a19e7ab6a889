"""The words that carry a question's meaning, or none of it, in each language the cache folds
(English, German, Portuguese): what the normaliser drops and what the meaning guard compares.

Words are given in their folded form (`normalise`: case-folded, `ä ö ü` written `ae oe ue`,
`ß` as `ss`, other accents dropped). A word means different things in different languages
(`no` is a negation in English and "in the" in Portuguese; `mal` is a filler in German and
"badly" in Portuguese), so the lists are per language and a pair of questions is read with the
lexicon of the language its words show (`detect`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["LANGUAGES", "Lexicon", "detect", "lexicon"]

LANGUAGES = ("en", "de", "pt")
_DIGIT = re.compile(r"\d")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def _pairs(text: str) -> tuple[tuple[str, str], ...]:
    return tuple((a, b) for a, b in (p.split() for p in text.split(";") if p.strip()))


def _classes(text: str) -> dict[str, str]:
    """`class: word word…; …` → {word: class}."""
    found = {}
    for part in text.split(";"):
        if part.strip():
            name, words = part.split(":")
            found.update({w: name.strip() for w in words.split()})
    return found


# words that mark a language: the commonest function words, each in one language only
_MARKERS = {
    "en": _words("the is are what how do does did of to and you my can why who when where "
                 "which were have has it i this that with for should will there was a an he "
                 "she they be not or your"),
    "de": _words("der die das ist sind ich wie was wer wo wann warum und ein eine einen nicht "
                 "mit von fuer hat kann man es den dem des im am zu auf sich welche welcher "
                 "wieso gibt mein meine ueber bei wurde wird"),
    "pt": _words("o os as e sao de do da dos das que como qual quais quem onde quando por "
                 "para um uma nao com em no na eu meu minha se tem voce posso faz mais"),
}

_STOPWORDS = {
    "en": _words("""
a an the is are was were be been being am do does did doing have has had having of at by for
as about it its i me my we our you your he him his she her they them their whom whose please
tell can could would should will shall may might must and or but if also there here s that
this these those
"""),
    "de": _words("""
der die das den dem des ein eine einen einem einer eines ist sind war waren bin bist sein
seid wird werden wurde wurden hat habe haben hatte hatten ich du er sie es wir ihr mir mich
dir dich uns euch sich mein meine meinen meinem meiner dein deine seine unser unsere kann
kannst koennen koennte muss musst muessen soll sollte sollten darf duerfen wuerde werde man
zu im am ins zum zur vom beim bei und oder aber auch in an auf fuer aus dass
"""),
    "pt": _words("""
o a os as um uma uns umas e ou mas de do da dos das em no na nos nas ao aos pelo pela por
para pra eu tu ele ela nos voces voce eles elas me te se lhe meu minha meus minhas seu sua
teu tua nosso nossa e sao era foi ser estar esta estao ha tem posso pode podem devo deve
consigo faco fazer que
"""),
}
"""Words with no content of their own. Negations, comparisons, relations, interrogatives and
scope words (some, any, only…) are never stopwords: they change what a question means."""

_FILLERS = {
    "en": _words("actually basically honestly anyway anyways really just so well hey hi hello "
                 "ok okay thanks thank roughly approximately kindly literally got even quick "
                 "pls plz um uh uhm hmm thx ty"),
    "de": _words("eigentlich denn mal bitte danke eben halt ja ueberhaupt wohl schon etwa nun "
                 "also doch bloss hallo hey gerne"),
    "pt": _words("afinal mesmo entao ai ne hein favor obrigado obrigada ola oi realmente bem "
                 "tipo"),
}
"""Discourse words ("actually", "eigentlich", "afinal"): a question means the same without
them. A word that has an opposite (`bem`/`mal`, `even`/`odd`) is never a filler."""

_NEGATIONS = {
    "en": _words("not no never none nothing nobody neither nor without nowhere non"),
    "de": _words("nicht kein keine keinen keinem keiner keines nie niemals nichts niemand "
                 "nirgends nirgendwo ohne weder"),
    "pt": _words("nao nunca jamais sem nenhum nenhuma nada ninguem nem"),
}

_INTERROGATIVES = {
    "en": _classes("what: what which; when: when; why: why; how: how; who: who whom whose; "
                   "where: where"),
    "de": _classes("what: was welche welcher welches welchen welchem; when: wann; "
                   "why: warum wieso weshalb weswegen; how: wie; who: wer wen wem wessen; "
                   "where: wo woher wohin; how much: wieviel wieviele"),
    "pt": _classes("what: qual quais oque; when: quando; why: porque; how: como quao; "
                   "who: quem; where: onde aonde; how much: quanto quanta quantos quantas"),
}
"""Interrogative words by the question they ask: `When did X happen?` and `Why did X happen?`
are different questions; `what` and `which` ask the same one."""

_PERSONS = {
    "en": _classes("I: i me my mine myself; we: we us our ours ourselves; you: you your yours "
                   "yourself yourselves; he: he him his himself; she: she her hers herself; "
                   "they: they them their theirs themselves"),
    "de": _classes("I: ich mich mir mein meine meinen meinem meiner meines; we: wir uns unser "
                   "unsere unseren unserem unserer; you: du dich dir dein deine deinen deinem "
                   "deiner euch euer eure; he: er ihn ihm"),
    "pt": _classes("I: eu mim meu minha meus minhas comigo; we: nosso nossa nossos nossas; "
                   "you: voce voces te ti teu tua teus tuas contigo; he: ele dele; she: ela "
                   "dela; they: eles elas deles delas"),
}
"""Whose question it is: "Who am I?" and "Who are you?", "What is my name?" and "What is your
name?" are different questions (a polite frame, "Can you tell me…", is taken off first)."""

_MODALS = {
    "en": _classes("can: can could may might; must: must should ought; will: will would shall"),
    "de": _classes("can: kann kannst koennen koennte koennten darf darfst duerfen durfte; "
                   "must: muss musst muessen soll sollst sollen sollte solltest sollten"),
    "pt": _classes("can: posso pode podem podemos consigo consegue poderia; "
                   "must: devo deve devem deveria deveriam"),
}
"""What a question asks of an action: whether one can, must or will (`Can I take it?` is not
`Must I take it?`, `Will it explode?` is not `Did it explode?`)."""

_PAST = {
    "en": _words("did was were had"),
    "de": _words("war waren warst wurde wurden hatte hatten"),
    "pt": _words("foi foram era eram estava estavam teve tinha"),
}
"""Auxiliaries of the past: "Was he a good king?" is not "Is he a good king?"."""

_YES_NO = _words("is are was were do does did can could will would should shall may might "
                 "must has have had am")
"""How an English yes/no question starts; a question with no question word that starts
otherwise is a fragment asking what ("capital of France?")."""

_ANTONYMS = {
    "en": _pairs("""
good bad; better worse; best worst; benefit risk; benefit harm; advantage disadvantage;
pro con; strength weakness; increase decrease; rise fall; more less; more fewer; most least;
big small; bigger smaller; biggest smallest; large small; larger smaller; high low;
higher lower; highest lowest; long short; longer shorter; on off; true false; safe dangerous;
safe unsafe; healthy unhealthy; before after; above below; over under; with without; cheap
expensive; cheaper dearer; hot cold; warm cold; win lose; won lost; buy sell; open close;
open closed; start stop; start end; begin end; enable disable; allow deny; allow forbid;
max min; maximum minimum; add remove; add drop; import export; input output; up down; in out;
first last; early late; earlier later; fast slow; faster slower; young old; younger older;
light heavy; light dark; rich poor; strong weak; stronger weaker; success failure; succeed
fail; love hate; like dislike; agree disagree; legal illegal; possible impossible; accept
reject; include exclude; positive negative; male female; north south; east west; left right;
yesterday tomorrow; past future; always never; all none; everyone nobody; everything nothing;
same different; pass fail; valid invalid; right wrong; correct incorrect; inside outside;
push pull; send receive; give take; lend borrow; upper lower; wet dry; full empty; happy sad;
rise drop; gain loss; profit loss; cause prevent; help hurt; friend enemy; asleep awake;
odd even; sweet sour; soft hard; easy hard; easy difficult; simple complex; deep shallow;
wide narrow; thick thin; clean dirty; near far; top bottom; front back; inner outer; encrypt
decrypt; upload download; login logout; mount unmount; install uninstall; lock unlock; raise
lower; greater less; greater smaller; closer farther; closer further
"""),
    "de": _pairs("""
gut schlecht; besser schlechter; beste schlechteste; gross klein; groesser kleiner;
groesste kleinste; hoch niedrig; hoeher niedriger; mehr weniger; vor nach; vorher nachher;
mit ohne; erlaubt verboten; legal illegal; oeffnen schliessen; geoeffnet geschlossen; offen
geschlossen; vorteil nachteil; vorteile nachteile; erhoehen senken; erhoehe senke; steigen
sinken; hinzufuegen entfernen; einfuegen loeschen; fuege loesche; gewinnen verlieren; gewann
verlor; maximal minimal; maximale minimale; maximum minimum; warm kalt; waermer kaelter; heiss
kalt; schnell langsam; schneller langsamer; alt jung; aelter juenger; neu alt; sicher
gefaehrlich; gesund ungesund; schaedlich harmlos; verschluesseln entschluesseln; verschluessele
entschluessele; mounten unmounten; mounte unmounte; einschalten ausschalten; ein aus; an aus;
auf zu; anmachen ausmachen; aufmachen zumachen;
anmelden abmelden; hochladen herunterladen; kaufen verkaufen; immer nie; alle keine; erste
letzte; frueh spaet; richtig falsch; wahr falsch; billig teuer; guenstig teuer; nah fern;
naeher weiter; oben unten; links rechts; norden sueden; osten westen; groesste kleinste
"""),
    "pt": _pairs("""
bom mau; bom ruim; bem mal; melhor pior; grande pequeno; maior menor; mais menos; alto
baixo; alta baixa; antes depois; com sem; ligar desligar; abrir fechar; abre fecha; vantagem
desvantagem; vantagens desvantagens; aumentar diminuir; ganhar perder; ganhou perdeu; maximo
minimo; maxima minima; legal ilegal; seguro perigoso; quente frio; rapido lento; velho novo;
jovem velho; adicionar remover; criptografar descriptografar; sempre nunca; todos nenhum;
primeiro ultimo; cedo tarde; certo errado; verdadeiro falso; barato caro; perto longe; norte
sul; leste oeste; esquerda direita; subir descer; entrar sair; comprar vender
"""),
}

_NUMBERS = {
    "en": _words("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
hundred thousand million billion trillion dozen half quarter third twice double triple
single couple few several many much first second fourth fifth
january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday tonight
"""),
    "de": _words("""
null eins zwei drei vier fuenf sechs sieben acht neun zehn elf zwoelf zwanzig dreissig
hundert tausend million millionen milliarde milliarden halb halbe viertel doppelt dutzend
erste zweite dritte viel viele wenig wenige januar februar maerz april mai juni juli august
september oktober november dezember montag dienstag mittwoch donnerstag freitag samstag
sonntag heute morgen gestern
"""),
    "pt": _words("""
zero dois duas tres quatro cinco seis sete oito nove dez onze doze vinte trinta cem cento
mil milhao milhoes bilhao meio meia metade dobro duzia primeiro primeira segundo segunda
terceiro muito muitos muitas pouco poucos janeiro fevereiro marco abril maio junho julho
agosto setembro outubro novembro dezembro domingo sabado hoje amanha ontem
"""),
}

_UNITS = _words("""
km kilometer kilometre mile meter metre cm mm inch foot feet yard kg kilogram gram g mg lb
pound ounce oz ton tonne liter litre ml dl l gallon cup celsius fahrenheit kelvin degree
percent % dollar euro yen usd eur gbp jpy inr rub chf second minute hour day week month
year decade century mi min m kwh watt volt amp mph kmh byte kb mb gb tb
kilometer meile meilen meter zentimeter gramm kilogramm kilo pfund unze tonne liter grad
prozent sekunde sekunden minute minuten stunde stunden tag tage tagen woche wochen monat monate
jahr jahre jahren jahrhundert
quilometro quilometros milha milhas metro metros centimetro grama gramas quilo quilos libra
libras onca tonelada litro litros grau graus celsius porcento segundo segundos minuto minutos
hora horas dia dias semana semanas mes meses ano anos seculo xicara copo
""")
"""Units of every language: a unit never means anything else worth matching loosely."""

_RELATIONS = {
    "en": _words("""
than vs versus before after over beat beats defeat defeated to from into against above below
more less bigger smaller larger higher lower older younger faster slower better worse cause
causes caused owns own pay pays paid sent send sends married follows precede precedes north
south east west left right behind inside outside near beside under closer between
"""),
    "de": _words("""
als gegen vor nach von ueber unter mehr weniger besser schlechter groesser kleiner hoeher
niedriger aelter juenger schneller langsamer naeher waermer kaelter besiegte schlug zwischen
"""),
    "pt": _words("""
doque contra antes depois de para sobre sob mais menos melhor pior maior menor venceu
derrotou ganhou perto longe entre
"""),
}
"""Words that relate others ("A bigger than B", "from A to B", "Brasil venceu Alemanha"): never
stopwords, so the guard's order check sees them between the words they relate."""

_REALTIME = {
    "en": _words("""
now today tonight currently latest recently breaking trending standings nowadays newest
tomorrow yesterday upcoming ongoing anymore still reigning
"""),
    "de": _words("""
jetzt heute heutige heutigen heutiger gerade aktuell aktuelle aktuellen aktueller derzeit
momentan gestern wechselkurs wechselkurse aktienkurs aktienkurse
boersenkurs spielstand neuigkeiten inzwischen mittlerweile neueste neuesten zurzeit
"""),
    "pt": _words("""
agora hoje atual atuais atualmente amanha ontem cotacao placar ultimas ultimos
"""),
}
"""Words that make an answer depend on when the question is asked, wherever they stand: such
questions are stored, never served. Words that do so only in some places ("the current
president", not "a current account"; "the price of gold", not "price elasticity") are read in
context by `engine.cache.validate`."""

OPERATORS = frozenset({"plus", "minus", "times", "divided", "pow", "equals", "notequals",
                       "lessthan", "greaterthan", "atmost", "atleast", "squared", "cubed",
                       "root", "sqrt", "factorial", "modulo"})
"""Arithmetic operators and comparison signs as the normaliser writes them (`12+4` → `12 plus
4`, `x > 5` → `x greaterthan 5`), in every language."""


@dataclass(frozen=True, slots=True)
class Lexicon:
    """The word lists of one or more languages, joined."""

    languages: tuple[str, ...]
    stopwords: frozenset[str]
    fillers: frozenset[str]
    negations: frozenset[str]
    interrogatives: dict[str, str]
    antonyms: dict[str, frozenset[str]]
    numbers: frozenset[str]
    realtime: frozenset[str]
    persons: dict[str, str]
    modals: dict[str, str]
    past: frozenset[str]

    def asks(self, words: list[str]) -> set[str]:
        """The questions `words` ask (by interrogative word); an English fragment with none,
        not starting as a yes/no question, asks what."""
        asks = {self.interrogatives[w] for w in words if w in self.interrogatives}
        if not asks and self.languages == ("en",) and words and words[0] not in _YES_NO:
            return {"what"}
        return asks

    def silent(self, word: str) -> bool:
        """A stopword or a filler: no content of its own."""
        return word in self.stopwords or word in self.fillers

    def quantity(self, word: str) -> bool:
        """A number, date, month, weekday, unit or quantity word."""
        return word in self.numbers or word in _UNITS or (
            not word.isalpha() and bool(_DIGIT.search(word)))


@lru_cache(maxsize=16)
def lexicon(languages: tuple[str, ...]) -> Lexicon:
    """The joined word lists of `languages`."""
    def join(table: dict[str, frozenset[str]]) -> frozenset[str]:
        return frozenset().union(*(table[lang] for lang in languages))

    antonyms: dict[str, set[str]] = {}
    for lang in languages:
        for a, b in _ANTONYMS[lang]:
            antonyms.setdefault(a, set()).add(b)
            antonyms.setdefault(b, set()).add(a)
    interrogatives: dict[str, str] = {}
    persons: dict[str, str] = {}
    modals: dict[str, str] = {}
    for lang in languages:
        interrogatives.update(_INTERROGATIVES[lang])
        persons.update(_PERSONS[lang])
        modals.update(_MODALS[lang])
    meaningful = join(_NEGATIONS) | join(_RELATIONS) | set(interrogatives) | OPERATORS
    return Lexicon(
        languages=languages,
        stopwords=join(_STOPWORDS) - meaningful,
        fillers=join(_FILLERS) - meaningful - set(antonyms),
        negations=join(_NEGATIONS),
        interrogatives=interrogatives,
        antonyms={word: frozenset(opposites) for word, opposites in antonyms.items()},
        numbers=join(_NUMBERS),
        realtime=join(_REALTIME),
        persons=persons,
        modals=modals,
        past=join(_PAST),
    )


def detect(words: list[str]) -> tuple[str, ...]:
    """The language(s) whose marker words `words` hold most of; English when none."""
    counts = {lang: sum(1 for w in words if w in markers) for lang, markers in _MARKERS.items()}
    best = max(counts.values())
    if best == 0:
        return ("en",)
    return tuple(lang for lang in LANGUAGES if counts[lang] == best)
