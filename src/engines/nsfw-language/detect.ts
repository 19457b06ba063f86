import { foldCompatibilityForms, forEachToken, isTitlecase, mixedCase } from './chunks.js';
import { ENGLISH_INNOCENT, englishWords } from './english-words.js';
import { Lexicon, type LexiconEntry, type Run, type TrieNode, wordRuns } from './lexicon.js';
import { type DetectionResult, type LanguageMatch, MatchWindow } from './match-window.js';
import { exclaimed, isCapitals, isGivenName, isInitial, type NameKind, nameKind } from './names.js';
import { OTHER_INNOCENT, otherLanguageWords } from './word-lists.js';

export type { DetectionResult, LanguageMatch } from './match-window.js';

/**
 * Symbols around a token that may wrap it rather than stand for a letter ("*fuck*", "shit!",
 * "+It's" in a diff). Before a word they are never letters; after one they may be ("sh!+").
 */
const WRAPPING = new Set(['!', '|', '+', '*', '#', '%']);
/** Longest token read as a word (a stretched one included); longer tokens are not words. */
const MAX_TOKEN_CHARS = 200;
/** What may separate the words of a listed phrase ("hijo de puta", "cul-de-sac", "K. Dick"). */
const PHRASE_GAP = /^[\s'’.,-]{1,3}$/;
/**
 * Longest space between the parts of a name: one space, or a line break and its indentation
 * ("Murray\n    Cumming" in a wrapped paragraph). After an initial it follows a full stop ("K.
 * Dick"), after a surname put first a comma ("Nègre, Jérôme").
 */
const MAX_NAME_SPACE = 80;
const POSSESSIVE = /^['’]$/;
/** Letters spelt apart ("f u c k", "s.h.i.t", "f-u-c-k"): at most this much between them. */
const MAX_SPELT_GAP = 3;
/** Longest spelt-apart run read as a word. */
const MAX_SPELT_LETTERS = 40;
/** Bound on the phrases being followed at once (each a few nodes of the trie). */
const MAX_PENDING = 32;
const SINGLE_LETTER = /^[\p{L}\p{N}]$/u;

interface Pending {
  start: number;
  node: TrieNode;
}
const NONE: Pending[] = [];

interface Spelt {
  start: number;
  end: number;
  letters: string;
  /** What is between its letters, the same each time ("f u c k", not "[a-s] 5"). */
  gap: string | null;
}

/**
 * One pass over a text: each token (chunks.ts) read against the lexicon as a whole word, letters
 * spelt apart joined, phrases followed from word to word. Memory stays bounded: the text is never
 * split into an array of tokens, and matches go through a MatchWindow.
 */
class Scan {
  /** The matches of the token being read, before they join the window. */
  private matches: LanguageMatch[] = [];
  private readonly window: MatchWindow;
  private tokens = 0;
  private pending: Pending[] = NONE;
  private spelt: Spelt | null = null;
  /** The token before, or -1 after data. */
  private previousStart = -1;
  private previousEnd = -1;
  /** Stems found in the token being read (reused: most tokens have none). */
  private readonly stems: LexiconEntry[][] = [];
  /** Whether the token before had matches: a listed word is never a given name. */
  private previousListed = false;
  /**
   * A name term written as a name but after no given name ("Dick", "Nègre"), waiting for the
   * next token: a name after it ("Dick Fowles", "Nègre, Jérôme") makes it innocent.
   */
  private nameBefore: { start: number; end: number; kind: NameKind } | null = null;

  constructor(
    private readonly text: string,
    private readonly lexicon: Lexicon,
  ) {
    this.window = new MatchWindow(lexicon.maxPhraseWords + 2);
  }

  token(start: number, end: number, data: boolean): void {
    this.tokens++;
    this.scanToken(start, end, data);
    if (this.matches.length > 0) {
      for (const match of this.matches) this.window.add(match, this.tokens);
      this.matches = [];
    }
    this.window.advance(this.tokens);
  }

  finish(): DetectionResult {
    this.endSpelt();
    for (const match of this.matches) this.window.add(match, this.tokens);
    return this.window.finish();
  }

  private innocent(start: number, end: number): void {
    this.window.addInnocent(start, end, this.tokens);
  }

  private scanToken(start: number, end: number, data: boolean): void {
    const previousStart = this.previousStart;
    const previousEnd = this.previousEnd;
    this.previousStart = data ? -1 : start;
    this.previousEnd = data ? -1 : end;
    const name = this.nameBefore;
    this.nameBefore = null;
    const matchesBefore = this.matches.length;
    if (data) {
      this.endSpelt();
      this.pending = NONE;
    } else {
      this.readToken(start, end, previousStart, previousEnd);
    }
    // Matches of this token, not of letters spelt apart before it.
    let listed = false;
    for (let index = matchesBefore; index < this.matches.length; index++) {
      if ((this.matches[index] as LanguageMatch).start >= start) listed = true;
    }
    if (name !== null) this.nameAfter(name, start, end, previousEnd, listed);
    this.previousListed = listed;
  }

  /** The token after a name term written as a name (`name`): innocent if it is a name too. */
  private nameAfter(
    name: { start: number; end: number; kind: NameKind },
    start: number,
    end: number,
    previousEnd: number,
    listed: boolean,
  ): void {
    const text = this.text;
    const isName =
      name.kind === 'given'
        ? (this.nameSpace(previousEnd, start) && isTitlecase(text, start, end)) ||
          (POSSESSIVE.test(this.gap(previousEnd, start) ?? '') && text.slice(start, end) === 's')
        : text[previousEnd] === ',' &&
          this.nameSpace(previousEnd + 1, start) &&
          (isGivenName(text, start, end, listed) ||
            (isInitial(text, start, end) && text[end] === '.'));
    if (isName) this.innocent(name.start, name.end);
  }

  /** Whether [from, to) is a space between the parts of a name (see MAX_NAME_SPACE). */
  private nameSpace(from: number, to: number): boolean {
    if (from < 0 || to <= from || to - from > MAX_NAME_SPACE) return false;
    const text = this.text;
    if (to - from === 1) return text[from] === ' ' || text[from] === '\u00a0';
    let breaks = 0;
    for (let index = from; index < to; index++) {
      const code = text.charCodeAt(index);
      if (code === 10) breaks++;
      else if (code !== 32 && code !== 9 && code !== 13) return false;
    }
    return breaks === 1;
  }

  /** A token that is not data: letters spelt apart, phrases going on, the word itself. */
  private readToken(start: number, end: number, previousStart: number, previousEnd: number): void {
    let pending = NONE;
    if (this.pending.length > 0) {
      const between = this.gap(previousEnd, start);
      if (between !== null && PHRASE_GAP.test(between)) pending = this.pending;
    }
    const single = end - start === 1 && SINGLE_LETTER.test(this.text[start] as string);
    const spelt = this.spelt;
    const between = single && spelt !== null ? this.gap(previousEnd, start) : null;
    if (spelt !== null && between !== null && (spelt.gap ?? between) === between) {
      spelt.end = end;
      spelt.gap = between;
      if (spelt.letters.length <= MAX_SPELT_LETTERS) spelt.letters += this.text[start];
    } else {
      this.endSpelt();
      if (single) this.spelt = { start, end, letters: this.text[start] as string, gap: null };
    }
    this.word(start, end, pending, previousStart, previousEnd);
  }

  /** What is between a token and the one before (ending at `previousEnd`), when short. */
  private gap(previousEnd: number, start: number): string | null {
    return previousEnd >= 0 && start - previousEnd <= MAX_SPELT_GAP
      ? this.text.slice(previousEnd, start)
      : null;
  }

  /**
   * A token read as a word, continuing `pending` phrases: without the symbols around it, then
   * with those after it. The token before may be a name running on to this one.
   */
  private word(
    start: number,
    end: number,
    pending: Pending[],
    previousStart: number,
    previousEnd: number,
  ): void {
    this.pending = NONE;
    if (end - start > MAX_TOKEN_CHARS) return;
    const matchesBefore = this.matches.length;
    // A word in mixed case ("fUcK") is read whole: no stems inside it, as in random "AMHFcuK8bF".
    const stems = mixedCase(this.text, start, end) ? null : this.stems;
    if (stems !== null) stems.length = 0;
    const plain =
      pending.length === 0 ? this.lexicon.readPlain(this.text, start, end, stems) : undefined;
    if (plain !== undefined) {
      for (const entries of stems ?? []) this.record(entries, start, end);
      if (plain !== null) {
        const next: Pending[] = [];
        this.reached(plain, start, end, next);
        if (next.length > 0) this.pending = next;
      }
    } else {
      let from = start;
      let to = end;
      while (from < to && WRAPPING.has(this.text[from] as string)) from++;
      while (to > from && WRAPPING.has(this.text[to - 1] as string)) to--;
      const runs = from < to ? wordRuns(this.text.slice(from, to)) : null;
      const matched = runs !== null && this.read(from, to, runs, pending, stems);
      if (!matched && to < end && from < to) {
        const wrapped = wordRuns(this.text.slice(from, end));
        if (wrapped !== null) this.read(from, end, wrapped, pending, stems);
      }
    }
    if (this.matches.length > matchesBefore) {
      this.checkName(this.matches.slice(matchesBefore), previousStart, previousEnd);
    }
  }

  /**
   * A token matching a name term (names.ts) written as a name: innocent after a given name or an
   * initial ("Dick" in "Philip Dick", "Nègre" in "Jérôme Nègre", "J. Nègre", "Jérôme NÈGRE");
   * else it may be a name put first ("Dick Fowles", "Nègre, Jérôme"): the next token tells.
   * Never with "!" after it: a name called out that way is the insult ("Nègre !").
   */
  private checkName(found: LanguageMatch[], previousStart: number, previousEnd: number): void {
    const kind = nameKind(found);
    const match = found[0];
    if (kind === null || match === undefined || exclaimed(this.text, match.end)) return;
    const { start, end } = match;
    const titlecase = isTitlecase(this.text, start, end);
    // Surnames in capitals after a given name, as French writes them.
    if (!titlecase && !(kind === 'surname' && isCapitals(this.text, start, end))) return;
    const afterName =
      previousEnd >= 0 &&
      ((this.nameSpace(previousEnd, start) &&
        isGivenName(this.text, previousStart, previousEnd, this.previousListed)) ||
        (this.text[previousEnd] === '.' &&
          this.nameSpace(previousEnd + 1, start) &&
          isInitial(this.text, previousStart, previousEnd)));
    if (afterName) this.innocent(start, end);
    else if (titlecase) this.nameBefore = { start, end, kind };
  }

  /** Letters spelt apart, read as one word when there are three or more. */
  private endSpelt(): void {
    const spelt = this.spelt;
    this.spelt = null;
    if (spelt === null || spelt.letters.length < 3 || spelt.letters.length > MAX_SPELT_LETTERS) {
      return;
    }
    const runs = wordRuns(spelt.letters);
    if (runs !== null) this.read(spelt.start, spelt.end, runs, NONE, []);
  }

  /** Reads one word at [start, end); whether it matched, is innocent or may go on as a phrase. */
  private read(
    start: number,
    end: number,
    runs: Run[],
    pending: Pending[],
    stems: LexiconEntry[][] | null,
  ): boolean {
    const matchesBefore = this.matches.length;
    let found = false;
    const next: Pending[] = [];
    for (const phrase of pending) {
      for (const node of this.lexicon.read([phrase.node], runs, null)) {
        found = this.reached(node, phrase.start, end, next) || found;
      }
    }
    for (const node of this.lexicon.read([this.lexicon.root], runs, stems)) {
      found = this.reached(node, start, end, next) || found;
    }
    if (stems !== null) {
      this.lexicon.readAnywhere(runs, stems);
      for (const entries of stems) this.record(entries, start, end);
      stems.length = 0;
    }
    if (runs.some((run) => run.wild)) this.preferEnglish(matchesBefore);
    this.pending = next.length > 0 ? next : NONE;
    return found || next.length > 0 || this.matches.length > matchesBefore;
  }

  /**
   * A word with wildcards that reads as words of several languages ("f*ck": fuck, fick) is taken
   * as English, the language of most grawlix.
   */
  private preferEnglish(from: number): void {
    const read = this.matches.slice(from);
    if (read.some((match) => match.language === 'en') && read.some((m) => m.language !== 'en')) {
      this.matches.length = from;
      this.matches.push(...read.filter((match) => match.language === 'en'));
    }
  }

  /**
   * A node reached by a whole word: its words, its innocent phrase, the phrases it begins.
   * Whether it is innocent.
   */
  private reached(node: TrieNode, start: number, end: number, next: Pending[]): boolean {
    this.record(node.words, start, end);
    if (node.innocent) this.innocent(start, end);
    const afterBreak = Lexicon.afterBreak(node);
    if (afterBreak !== undefined && next.length < MAX_PENDING) {
      next.push({ start, node: afterBreak });
    }
    return node.innocent;
  }

  private record(entries: LexiconEntry[], start: number, end: number): void {
    for (const { language, term } of entries) this.matches.push({ language, start, end, term });
  }
}

/**
 * Obscene language in English, German, Spanish, French and Italian, as whole words (lexicon.ts,
 * english-words.ts, word-lists.ts). One pass over the whole text, in time linear in its length:
 * each token is read against a trie, and a token longer than a word is not read.
 */
export class LanguageDetector {
  private readonly lexicon = new Lexicon(
    [...englishWords(), ...otherLanguageWords()],
    [...ENGLISH_INNOCENT, ...OTHER_INNOCENT],
  );

  detect(text: string): DetectionResult {
    const folded = foldCompatibilityForms(text);
    const scan = new Scan(folded, this.lexicon);
    forEachToken(folded, (start, end, data) => scan.token(start, end, data));
    return scan.finish();
  }
}
