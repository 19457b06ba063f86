import { isTitlecase } from './chunks.js';
import { ENGLISH_NAMES } from './english-words.js';
import { foldWord, type LexiconEntry } from './lexicon.js';

/**
 * Listed words that are also surnames, read as a name (not reported) after a given name:
 * "Jérôme Nègre", "Jean-Pierre Nègre", "J. Nègre", "Jérôme NÈGRE", or inverted, "Nègre, Jérôme".
 * Each is a surname people are known by (Charles Nègre, the photographer; Giovanni Verga, the
 * novelist), in a language that writes its insults in small letters mid-sentence ("sale nègre",
 * "vete a la verga"), so a capital is a name's mark. Considered and left out:
 * - "fick": Adolf Fick is a surname, but German writes nouns with a capital, so "Schneller
 *   Fick" has the shape of a name; his name and law are innocent phrases instead (word-lists.ts).
 * - "troia", "polla", "puta", "mussa": surnames or given names in places, too rarely to open
 *   their insults to every capitalised word before them.
 * - "cocu", "kunt": not listed words, nothing to except.
 * English names ("Dick", "Cumming", "Hooker", "Dyke") are ENGLISH_NAMES: given names too, so they
 * may also come first ("Dick Fowles").
 */
const SURNAMES: ReadonlyArray<LexiconEntry> = [
  { language: 'fr', term: 'nègre' },
  { language: 'es', term: 'verga' },
];
const SURNAME_KEYS = new Set(SURNAMES.map(({ language, term }) => `${language}:${term}`));

/**
 * Words that are not a given name though written like one: the words that come before these
 * slurs in insults, capitalised at a sentence's start or in Title Case ("Sale Nègre", "Hé
 * Nègre", "Pinche Verga", "Stupid Dick"): articles, possessives and pronouns, prepositions,
 * interjections and the adjectives of insults, in the engine's languages. A listed word before
 * a name term is never a given name either ("Putain Nègre").
 */
// biome-ignore format: word lists read better packed than one word a line
const NOT_GIVEN_NAMES = new Set(
  [
    // French
    'le', 'la', 'les', 'un', 'une', 'des', 'du', 'de', 'ce', 'cet', 'cette', 'ces', 'mon', 'ma',
    'mes', 'ton', 'ta', 'tes', 'son', 'sa', 'ses', 'notre', 'nos', 'votre', 'vos', 'leur',
    'leurs', 'quel', 'quelle', 'tu', 'toi', 'vous', 'il', 'elle', 'on', 'moi', 'et', 'ou', 'au',
    'aux', 'pour', 'par', 'avec', 'sans', 'chez', 'contre', 'hé', 'eh', 'oh', 'ô', 'ho', 'hep',
    'salut', 'bonjour', 'dis', 'écoute', 'tiens', 'va', 'sale', 'sales', 'espèce', 'sacré',
    'sacrée', 'foutu', 'foutue', 'maudit', 'maudite', 'gros', 'grosse', 'petit', 'petite',
    'vieux', 'vieil', 'vieille', 'pauvre', 'bande', 'stupide', 'crétin', 'imbécile', 'con',
    // Spanish
    'el', 'los', 'las', 'lo', 'unos', 'unas', 'mi', 'mis', 'tus', 'su', 'sus', 'este', 'esta',
    'ese', 'esa', 'qué', 'que', 'del', 'en', 'con', 'por', 'para', 'sin', 'oye',
    'ay', 'hola', 'vete', 'chupa', 'pinche', 'pura', 'puro', 'gran', 'grande', 'pedazo', 'hijo',
    'maldito', 'maldita', 'estúpido', 'estúpida', 'sucio', 'sucia',
    // Italian
    'il', 'lo', 'gli', 'uno', 'della', 'dei', 'di', 'da', 'per', 'mio', 'mia', 'tuo', 'tua',
    'suo', 'sua', 'questo', 'questa', 'quel', 'quella', 'che', 'ehi', 'ciao', 'brutto',
    'brutta', 'sporco', 'sporca', 'stupido', 'stupida', 'vecchio', 'vecchia', 'maledetto',
    'maledetta',
    // English
    'the', 'an', 'this', 'that', 'my', 'your', 'his', 'her', 'our', 'their', 'you', 'he', 'she',
    'we', 'they', 'me', 'and', 'or', 'of', 'to', 'on', 'at', 'for', 'with', 'by', 'hey',
    'yo', 'hi', 'hello', 'dirty', 'stupid', 'dumb', 'filthy', 'fat', 'big', 'little', 'ugly',
    'cheap', 'damn', 'bloody', 'suck', 'eat', 'lick', 'nice', 'huge', 'small', 'tiny', 'lazy',
    'silly', 'what', 'such',
  ].map(foldWord),
);
/** Longer than any word of NOT_GIVEN_NAMES: not folded to be looked up. */
const LONGEST_LISTED = 12;

/** How a term may be read as a name: a given name or surname (English), or a surname only. */
export type NameKind = 'given' | 'surname';

/** Whether the matches of one token are all of one name term (else none is read as a name). */
export function nameKind(matches: readonly LexiconEntry[]): NameKind | null {
  let kind: NameKind | null = null;
  for (const { language, term } of matches) {
    const next =
      language === 'en' && ENGLISH_NAMES.has(term)
        ? 'given'
        : SURNAME_KEYS.has(`${language}:${term}`)
          ? 'surname'
          : null;
    if (next === null || (kind !== null && next !== kind)) return null;
    kind = next;
  }
  return kind;
}

/** Whether a token is in capitals, two letters or more ("NÈGRE"): surnames are, in French. */
export function isCapitals(text: string, start: number, end: number): boolean {
  const word = text.slice(start, end);
  return end - start >= 2 && word === word.toUpperCase() && word !== word.toLowerCase();
}

/**
 * Whether the token at [start, end) is written as a given name: in title case, two letters or
 * more, not a listed word (`listed`: the token had matches) and not a word of NOT_GIVEN_NAMES.
 */
export function isGivenName(text: string, start: number, end: number, listed: boolean): boolean {
  if (listed || end - start < 2 || !isTitlecase(text, start, end)) return false;
  return end - start > LONGEST_LISTED || !NOT_GIVEN_NAMES.has(foldWord(text.slice(start, end)));
}

/** Whether an initial: one capital ("J" of "J. Nègre"). */
export function isInitial(text: string, start: number, end: number): boolean {
  return end - start === 1 && isTitlecase(text, start, end);
}

/** Whether "!" follows `end`, at once or after one space (French puts one before it). */
export function exclaimed(text: string, end: number): boolean {
  const next = text[end];
  if (next === '!') return true;
  return (next === ' ' || next === '\u00a0' || next === '\u202f') && text[end + 1] === '!';
}
