import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../../src/paths.js';

/** The languages of the language engine. */
export const LANGUAGES = ['en', 'de', 'es', 'fr', 'it'] as const;
export type Language = (typeof LANGUAGES)[number];

/**
 * The random data's seed: the same texts in every run, so a test over them passes or fails the
 * same way each time (a false positive of the engine one text in a million must not fail one CI
 * run in fifty). `ASSAY_TEST_CORPUS_SEED` draws other texts, to look for more.
 */
export const CORPUS_SEED = Number(process.env.ASSAY_TEST_CORPUS_SEED ?? 0x5eed);

/** mulberry32: 32 random bits at a time from `seed`, the same for the same seed. */
function seededWords(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let word = Math.imul(state ^ (state >>> 15), state | 1);
    word ^= word + Math.imul(word ^ (word >>> 7), word | 61);
    return (word ^ (word >>> 14)) >>> 0;
  };
}

let nextWord = seededWords(CORPUS_SEED);

function random(bytes: number): Buffer {
  const buffer = Buffer.alloc(bytes);
  for (let offset = 0; offset < bytes; offset += 4) {
    const word = nextWord();
    for (let byte = 0; byte < 4 && offset + byte < bytes; byte++) {
      buffer[offset + byte] = (word >>> (8 * byte)) & 0xff;
    }
  }
  return buffer;
}

function hex(bytes: number): string {
  return random(bytes).toString('hex');
}

/** A UUID's layout over 16 random bytes (any version: identifiers in the wild are not all v4). */
function uuid(): string {
  const digits = hex(16);
  const groups = [digits.slice(0, 8), digits.slice(8, 12), digits.slice(12, 16)];
  return [...groups, digits.slice(16, 20), digits.slice(20)].join('-');
}

function lines(text: string, width: number): string {
  return text.match(new RegExp(`.{1,${width}}`, 'g'))?.join('\n') ?? '';
}

/**
 * Whole parts of `next()`, joined by `separator`, as many as fit in `bytes`. A part cut at the
 * end would be no longer data but a few random letters, which can spell a word ("+FuK", the
 * first 4 characters of a base64 part, is a disguised obscenity in any text).
 */
function fill(bytes: number, separator: string, next: () => string): string {
  const parts: string[] = [];
  let length = -separator.length;
  for (;;) {
    const part = next();
    length += separator.length + part.length;
    if (length > bytes && parts.length > 0) return parts.join(separator);
    parts.push(part);
  }
}

/**
 * How hashes, encoded data and identifiers are laid out in real text: one long token, lines,
 * hexdumps, short git hashes, UUIDs with braces or commas, base64 and base64url (JWT-like).
 */
const DATA_LAYOUTS: Array<(bytes: number) => string> = [
  (bytes) => hex(bytes).slice(0, bytes),
  (bytes) => lines(hex(bytes).toUpperCase(), 64).slice(0, bytes),
  (bytes) =>
    lines(
      fill(bytes, ' ', () => hex(1)),
      48,
    ),
  (bytes) => fill(bytes, ' ', () => hex(4)),
  (bytes) => fill(bytes, '\n', () => `${hex(4).slice(0, 7)} ${hex(20)}`),
  (bytes) => fill(bytes, ' ', () => hex(4).slice(0, 7)),
  (bytes) => fill(bytes, ', ', () => `0x${hex(1)}`),
  (bytes) => fill(bytes, '\n', () => `sha256:${hex(32)}`),
  (bytes) => random(bytes).toString('base64').slice(0, bytes),
  (bytes) => lines(random(bytes).toString('base64'), 76).slice(0, bytes),
  (bytes) => lines(random(bytes).toString('base64'), 64).slice(0, bytes),
  (bytes) =>
    fill(bytes, '\n', () =>
      [24, 96, 32].map((size) => random(size).toString('base64url')).join('.'),
    ),
  (bytes) => fill(bytes, ' ', () => random(9).toString('base64')),
  (bytes) => fill(bytes, '\n', uuid),
  (bytes) => fill(bytes, ',', () => uuid().toUpperCase()),
  (bytes) => fill(bytes, ' ', () => `{${uuid()}}`),
  (bytes) =>
    fill(
      bytes,
      ' ',
      () => [hex(8), random(12).toString('base64'), uuid()][(random(1)[0] as number) % 3] as string,
    ),
];

/**
 * `count` random texts of at most `bytes` characters each: hex, base64 and UUIDs in every layout;
 * the same for the same seed.
 */
export function randomDataTexts(count: number, bytes = 1024, seed = CORPUS_SEED): string[] {
  nextWord = seededWords(seed);
  return Array.from({ length: count }, (_, index) =>
    (DATA_LAYOUTS[index % DATA_LAYOUTS.length] as (bytes: number) => string)(bytes),
  );
}

export interface ProseFile {
  path: string;
  text: string;
}

/** The clean prose the project ships for the language engine's tests (see its README). */
export const PROSE_FIXTURES = join(packageRoot(), 'test/fixtures/prose');

/**
 * Every file under `root` (test/fixtures/prose by default), in path order: licenses, copyright
 * files and READMEs in five languages, all committed, so the result never depends on what else
 * is installed on the machine.
 */
export function shippedProse(root = PROSE_FIXTURES): ProseFile[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name))
    .sort()
    .map((path) => ({ path, text: readFileSync(path, 'utf8') }));
}

/**
 * Innocent words that naive filters flag (the Scunthorpe problem), in sentences: each holds an
 * obscenity inside a longer word, or is a listed word in an innocent phrase.
 */
export const SCUNTHORPE_SENTENCES = [
  'The class met in Scunthorpe, Essex, Sussex and Middlesex before the assassin arrived.',
  'In the cockpit the therapist read an analysis of the assessment, then ordered a cocktail.',
  'Shiitake soup, a grape and a pussycat: hello from the Dickens museum.',
  'The passage on the bass clef was a classic; the assistant passed the assignment to Cassie.',
  'Hancock and Cockburn cocked their hats at the peacock on the cockney bus to Penistone.',
  'Matsushita built the arsenal; the constitution is cumulative, a circumstance of document titles.',
  'Sextus used a sextant; Titian painted the Titanic; the butter buttress was a hotshot.',
  'She graduated magna cum laude; summa cum laude went to the analyst with the analog watch.',
  'Tit for tat, said the blue tit to the great tit by the pussy willow at the cul-de-sac.',
  'Moby Dick sat on Dick Van Dyke at the Van Dyke gallery, reading Philip K. Dick.',
  'The shitake, the Scunthorpe United scarf and the Essex cockerel were all in the pass.',
  'The therapists glassed the grapefruit; assorted bassoons were on sale in Lancashire.',
  'Fukushima and Fukuoka, Kuala Lumpur and Penistone, Arsenal and Cockermouth.',
  'Dickinson and Dickerson met Hitchcock; Babcock and Woodcock went to Cockermouth.',
  'Cumulus clouds over Scunthorpe made the cumbersome sums of the accumulator harder.',
];

/** Obscene words of each language (each a word of the engine's lists) that evasions disguise. */
export const OBSCENE_WORDS: Record<Language, string[]> = {
  en: [
    'fuck',
    'fucking',
    'motherfucker',
    'shit',
    'bullshit',
    'bitch',
    'asshole',
    'cunt',
    'dick',
    'cock',
    'pussy',
    'bastard',
    'whore',
    'slut',
    'wanker',
    'twat',
    'piss',
    'faggot',
    'cocksucker',
    'dickhead',
  ],
  de: [
    'scheiße',
    'arschloch',
    'fotze',
    'wichser',
    'hure',
    'schlampe',
    'verfickt',
    'gefickt',
    'schwuchtel',
    'muschi',
    'hurensohn',
    'kacke',
    'pisse',
    'scheißkerl',
    'arsch',
  ],
  es: [
    'mierda',
    'puta',
    'cabrón',
    'maricón',
    'polla',
    'coño',
    'joder',
    'gilipollas',
    'pendejo',
    'culo',
    'mamada',
    'tetas',
    'cojones',
    'verga',
    'chingada',
  ],
  fr: [
    'merde',
    'putain',
    'connard',
    'salope',
    'enculé',
    'pute',
    'enfoiré',
    'chatte',
    'branleur',
    'couilles',
    'nique',
    'foutre',
    'connasse',
    'salaud',
    'bâtard',
  ],
  it: [
    'cazzo',
    'stronzo',
    'vaffanculo',
    'puttana',
    'troia',
    'coglione',
    'minchia',
    'merda',
    'figa',
    'zoccola',
    'frocio',
    'mignotta',
    'stronzata',
    'pompino',
    'culo',
  ],
};

const LEET: Record<string, string> = { a: '4', e: '3', i: '1', o: '0', s: '5', t: '7' };
/** Cyrillic letters that look like Latin ones. */
const CYRILLIC: Record<string, string> = { a: 'а', c: 'с', e: 'е', o: 'о', p: 'р' };
const SYMBOLS: Record<string, string> = { a: '@', s: '$', i: '!' };

function replaceFirst(word: string, table: Record<string, string>, times = 1): string | null {
  let result = word;
  let done = 0;
  for (let index = 0; index < result.length && done < times; index++) {
    const swap = table[result[index] as string];
    if (swap !== undefined && index > 0) {
      result = result.slice(0, index) + swap + result.slice(index + 1);
      done++;
    }
  }
  return done === times ? result : null;
}

/** The full-width form of each ASCII letter ("ｆｕｃｋ"). */
function fullWidth(word: string): string {
  return word.replace(/[a-z]/gi, (letter) => String.fromCharCode(letter.charCodeAt(0) + 0xfee0));
}

/**
 * Ways people disguise a word: case, punctuation around, spelling apart, repeats, symbols, leet,
 * look-alike letters of other scripts.
 */
function disguises(word: string): string[] {
  const letters = [...word];
  const vowel = letters.findIndex((letter, index) => index > 0 && /[aeiouäöüéèóíáú]/.test(letter));
  const stretched =
    vowel > 0
      ? letters.map((letter, index) => (index === vowel ? letter.repeat(4) : letter)).join('')
      : null;
  const starred =
    vowel > 0 && vowel < letters.length - 1
      ? letters.map((letter, index) => (index === vowel ? '*' : letter)).join('')
      : null;
  const variants = [
    word,
    word.toUpperCase(),
    letters.map((letter, index) => (index % 2 ? letter.toUpperCase() : letter)).join(''),
    word[0]?.toUpperCase() + word.slice(1),
    `"${word}!"`,
    `(${word})`,
    `...${word}?!`,
    `*${word}*`,
    `#${word}`,
    letters.join(' '),
    letters.join('.'),
    letters.join('-'),
    letters.join('_'),
    letters.join('  '),
    stretched,
    `${word}${(letters[letters.length - 1] as string).repeat(3)}`,
    starred,
    replaceFirst(word, SYMBOLS),
    replaceFirst(word, LEET),
    replaceFirst(word, LEET, 2),
    replaceFirst(word, CYRILLIC),
    fullWidth(word),
  ];
  return variants.filter((variant): variant is string => variant !== null);
}

/** Each language's obscene words in disguise, each in a sentence of its own. */
export function evasionCorpus(): Record<Language, string[]> {
  const corpus = {} as Record<Language, string[]>;
  for (const language of LANGUAGES) {
    corpus[language] = OBSCENE_WORDS[language].flatMap((word) =>
      disguises(word).map((disguised) => `Then he said ${disguised} and left.`),
    );
  }
  return corpus;
}
