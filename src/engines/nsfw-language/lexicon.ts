/** One listed word or phrase: its language and the word reported in the trace. */
export interface LexiconEntry {
  language: string;
  term: string;
}

/** The words of one term of one language. */
export interface WordSource {
  language: string;
  term: string;
  /** Whole words and phrases (words separated by spaces, hyphens or apostrophes). */
  forms: string[];
  /** Stems obscene whatever follows them in the word ("bitch" in "bitchy"). */
  prefixes?: string[];
  /** Stems obscene anywhere in a word ("fuck" in "motherfucker"). */
  anywhere?: string[];
}

/** Between the words of a phrase in the trie. */
const WORD_BREAK = 32; // ' '

export class TrieNode {
  /** By the character code of the next letter (or of the break between words). */
  readonly next = new Map<number, TrieNode>();
  /** Listed words and phrases ending here (whole words only). */
  readonly words: LexiconEntry[] = [];
  /** Listed stems ending here (any ending). */
  readonly stems: LexiconEntry[] = [];
  /** An innocent phrase ends here: what it covers is not reported. */
  innocent = false;
}

/**
 * Letters that look-alike digits and symbols stand for. They are read only in a token that reads
 * as a word (see `wordRuns`), never in numbers, hashes or encoded data.
 */
const LOOK_ALIKES: Record<string, string> = {
  '0': 'o',
  '1': 'il',
  '3': 'e',
  '4': 'a',
  '5': 's',
  '7': 't',
  '8': 'b',
  '9': 'g',
  '@': 'a',
  $: 's',
  '!': 'i',
  '|': 'il',
  '+': 't',
  '€': 'e',
  '¢': 'c',
};

/** Cyrillic and Greek letters read as the Latin letters they look like, in a Latin word. */
const CONFUSABLES: Record<string, string> = {
  а: 'a',
  с: 'c',
  е: 'e',
  һ: 'h',
  і: 'i',
  ј: 'j',
  к: 'k',
  о: 'o',
  р: 'p',
  ѕ: 's',
  у: 'y',
  х: 'x',
  α: 'a',
  ι: 'i',
  κ: 'k',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'u',
};

/** Letters folded to several letters or kept as they are (ñ is a letter of its own: "coño" is not "cono"). */
const SPECIAL_FOLDS: Record<string, string> = { ß: 'ss', æ: 'ae', œ: 'oe', ø: 'o', ł: 'l', ñ: 'ñ' };
const foldCache = new Map<string, string>();

/** Lower case without diacritics ("Scheiße" → "scheisse", "enculé" → "encule"). */
export function foldWord(word: string): string {
  let folded = '';
  for (const char of word) {
    const code = char.charCodeAt(0);
    if (code < 0x80) {
      folded += code >= 65 && code <= 90 ? String.fromCharCode(code + 32) : char;
      continue;
    }
    let fold = foldCache.get(char);
    if (fold === undefined) {
      const lower = char.toLowerCase();
      fold =
        SPECIAL_FOLDS[lower] ??
        lower
          .normalize('NFD')
          .replace(/\p{M}/gu, '')
          .replace(/[ßæœøł]/g, (letter) => SPECIAL_FOLDS[letter] as string);
      foldCache.set(char, fold);
    }
    folded += fold;
  }
  return folded;
}

/** A run of one letter (or one look-alike) in a token: "fuuuck" is f, u×3, c, k. */
export interface Run {
  /** The letters it may stand for; empty for any letter. */
  letters: string;
  count: number;
  /** A wildcard: a vowel alone ("sh*t"), any letter two or more in a row ("f**k", "a**hole"). */
  wild: boolean;
  /** One character repeated ("uuu", "$$"), not a mix ("s$$"): only such a run is stretched. */
  pure: boolean;
}

/** Longest token (in runs) read as a word; longer ones are not words. */
const MAX_RUNS = 40;
const HEX = /^[0-9a-f]+$/i;
const LETTER = /\p{L}/u;
const NOT_ASCII = /[^\p{ASCII}]/u;
const VOWELS = 'aeiouy';

/**
 * A token as runs of letters, or null when it does not read as a word. It reads as a word when
 * it has a letter; when it has digits, at least as many letters as digits, only digits that look
 * like letters, and not hexadecimal digits only ("a55c5", "d41b00b7e" are numbers, "sh1t" is a
 * word); when it has wildcards, four characters or more, wildcards only inside ("sh*t", not "ji*"
 * or "t*t"), no digit ("TR#14"), at least two letters and no more wildcards than letters (at
 * most four). A wildcard alone stands for a vowel ("sh*t", not "Pi*s"), several for any letters.
 */
export function wordRuns(token: string): Run[] | null {
  let folded = foldWord(token);
  if (NOT_ASCII.test(folded) && /[a-z]/.test(folded)) {
    folded = folded.replace(/./gu, (char) => CONFUSABLES[char] ?? char);
  }
  let letters = 0;
  let digits = 0;
  let wildcards = 0;
  const runs: Run[] = [];
  let last: Run | undefined;
  let lastChar = '';
  for (const char of folded) {
    const code = char.charCodeAt(0);
    let stands: string;
    if (code >= 97 && code <= 122) {
      letters++;
      stands = char;
    } else if (code === 42 || code === 35 || code === 37) {
      wildcards++; // * # %
      if (last?.wild) {
        last.letters = '';
        runs.push({ letters: '', count: 1, pure: true, wild: true });
      } else {
        last = { letters: VOWELS, count: 1, pure: true, wild: true };
        runs.push(last);
      }
      continue;
    } else if (LOOK_ALIKES[char] !== undefined) {
      if (code >= 48 && code <= 57) digits++;
      stands = LOOK_ALIKES[char] as string;
    } else if (code >= 0x80 && LETTER.test(char)) {
      letters++;
      stands = char;
    } else {
      return null; // a digit or symbol that stands for no letter
    }
    if (last !== undefined && !last.wild && last.letters === stands) {
      last.count++;
      if (char !== lastChar) last.pure = false;
    } else {
      last = { letters: stands, count: 1, pure: true, wild: false };
      if (runs.push(last) > MAX_RUNS) return null;
    }
    lastChar = char;
  }
  if (letters === 0) return null;
  if (digits > 0 && (digits > letters || HEX.test(token))) return null;
  if (wildcards > 0) {
    // Inside a word only ("ji*.c" is a file pattern); a wildcard first would spread over the trie.
    if (runs[0]?.wild || runs[runs.length - 1]?.wild || digits > 0) return null;
    if (letters < 2 || wildcards > Math.min(letters, 4) || folded.length < 4) return null;
  }
  return runs;
}

/**
 * The words of several languages in one trie, with the innocent phrases. Reading a token walks
 * the trie run by run: a run of n letters consumes exactly n letters of a listed word, or (n ≥ 3
 * of one character, a stretched word: "fuuuck", "asss") between 1 and n; a wildcard consumes one
 * letter (a vowel when alone).
 */
export class Lexicon {
  readonly root = new TrieNode();
  /** Stems matched anywhere in a word, in a trie of their own (few, so cheap to try everywhere). */
  readonly anywhere = new TrieNode();
  /** The most words in a listed or innocent phrase. */
  maxPhraseWords = 1;

  constructor(sources: WordSource[], innocentPhrases: string[]) {
    for (const { language, term, forms, prefixes = [], anywhere = [] } of sources) {
      const entry = { language, term };
      for (const form of forms) this.insert(this.root, form).words.push(entry);
      for (const stem of prefixes) this.insert(this.root, stem).stems.push(entry);
      for (const stem of anywhere) this.insert(this.anywhere, stem).stems.push(entry);
    }
    for (const phrase of innocentPhrases) this.insert(this.root, phrase).innocent = true;
  }

  private insert(root: TrieNode, phrase: string): TrieNode {
    const words = foldWord(phrase)
      .split(/[\s'’-]+/)
      .filter(Boolean);
    this.maxPhraseWords = Math.max(this.maxPhraseWords, words.length);
    let node = root;
    for (const [index, word] of words.entries()) {
      for (const letter of index === 0 ? word : ` ${word}`) {
        const code = letter.charCodeAt(0);
        let child = node.next.get(code);
        if (child === undefined) {
          child = new TrieNode();
          node.next.set(code, child);
        }
        node = child;
      }
    }
    return node;
  }

  /**
   * The nodes reached by reading `runs` (from `start`) from `from` (roots, or nodes after a word
   * break); every stem reached on the way goes into `stems`. With `looseStart` the first run may
   * also be read short: its first letters may belong to the word before ("offfuck").
   */
  read(
    from: TrieNode[],
    runs: Run[],
    stems: LexiconEntry[][] | null,
    start = 0,
    looseStart = false,
  ): TrieNode[] {
    let states = from;
    for (let index = start; index < runs.length && states.length > 0; index++) {
      const run = runs[index] as Run;
      const loose = (run.count >= 3 && run.pure) || (looseStart && index === start);
      const next: TrieNode[] = [];
      for (const state of states) {
        if (run.wild && run.letters === '') {
          for (const [letter, child] of state.next) {
            if (letter !== WORD_BREAK) reach(next, child, stems);
          }
          continue;
        }
        for (let alternative = 0; alternative < run.letters.length; alternative++) {
          const letter = run.letters.charCodeAt(alternative);
          let node: TrieNode | undefined = state;
          for (let taken = 1; taken <= run.count; taken++) {
            node = node.next.get(letter);
            if (node === undefined) break;
            if (taken === run.count || loose) reach(next, node, stems);
            // Fewer letters than the run has: the rest may follow a stem ("fuckkk", "bitchh").
            else if (stems !== null && node.stems.length > 0) stems.push(node.stems);
          }
        }
      }
      states = next;
    }
    return states;
  }

  /**
   * The stems of `anywhere` found starting at any run of the token go into `stems`. Not in a token
   * with wildcards: inside a longer token they would find a stem almost anywhere.
   */
  readAnywhere(runs: Run[], stems: LexiconEntry[][]): void {
    if (runs.some((run) => run.wild)) return;
    const anywhere = [this.anywhere];
    for (let start = 0; start < runs.length; start++) {
      const run = runs[start] as Run;
      // Most runs start no stem: skip them without reading.
      if (run.letters.length === 1 && !this.anywhere.next.has(run.letters.charCodeAt(0))) continue;
      this.read(anywhere, runs, stems, start, true);
    }
  }

  /**
   * The fast way for most tokens: ASCII letters only, none three times in a row (so each letter
   * is one letter of the word, as `read` would take it). The node reached from the root, or null;
   * undefined when the token is not such a token. Stems reached go into `stems` (if not null),
   * the anywhere stems included.
   */
  readPlain(
    text: string,
    start: number,
    end: number,
    stems: LexiconEntry[][] | null,
  ): TrieNode | null | undefined {
    let previous = -1;
    let repeats = 0;
    for (let index = start; index < end; index++) {
      const code = text.charCodeAt(index) | 0x20;
      if (code < 97 || code > 122) return undefined;
      repeats = code === previous ? repeats + 1 : 0;
      if (repeats === 2) return undefined;
      previous = code;
    }
    for (let from = start; from < end && stems !== null; from++) {
      let node = this.anywhere.next.get(text.charCodeAt(from) | 0x20);
      for (let index = from + 1; node !== undefined; index++) {
        if (node.stems.length > 0) stems.push(node.stems);
        if (index === end) break;
        node = node.next.get(text.charCodeAt(index) | 0x20);
      }
    }
    let node: TrieNode | undefined = this.root;
    for (let index = start; index < end; index++) {
      node = node.next.get(text.charCodeAt(index) | 0x20);
      if (node === undefined) return null;
      if (stems !== null && node.stems.length > 0) stems.push(node.stems);
    }
    return node;
  }

  /** After a whole word was read: the node that continues a phrase with the next word, if any. */
  static afterBreak(node: TrieNode): TrieNode | undefined {
    return node.next.get(WORD_BREAK);
  }
}

function reach(states: TrieNode[], node: TrieNode, stems: LexiconEntry[][] | null): void {
  if (states.includes(node)) return;
  states.push(node);
  if (stems !== null && node.stems.length > 0) stems.push(node.stems);
}
