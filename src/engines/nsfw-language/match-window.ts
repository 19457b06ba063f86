/** One obscenity: where it is in the examined text (UTF-16 offsets, end exclusive) and which word. */
export interface LanguageMatch {
  language: string;
  start: number;
  end: number;
  term: string;
}

export interface DetectionResult {
  /** The first matches of each language (at most `LISTED_PER_LANGUAGE`), in text order. */
  matches: LanguageMatch[];
  /** How many matches of each language, listed or not. */
  counts: Record<string, number>;
}

/** Matches listed per language; the rest are counted (a text of obscenities stays small). */
export const LISTED_PER_LANGUAGE = 20;

interface Waiting {
  match: LanguageMatch;
  token: number;
}

/**
 * Matches on their way to the result. Each waits a few tokens, long enough for any phrase that
 * covers it to end: an innocent phrase ("cum laude", "Moby Dick") drops it, and so does a longer
 * match of its language ("hijo de puta" over "puta"). Memory stays bounded whatever the text.
 */
export class MatchWindow {
  private readonly waiting: Waiting[] = [];
  private readonly innocent: Array<{ start: number; end: number; token: number }> = [];
  private readonly matches: LanguageMatch[] = [];
  private readonly counts: Record<string, number> = {};
  private readonly lastReported = new Map<string, LanguageMatch>();

  /** `tokens`: the most words a phrase has, and so how long a match waits. */
  constructor(private readonly tokens: number) {}

  add(match: LanguageMatch, token: number): void {
    this.waiting.push({ match, token });
  }

  addInnocent(start: number, end: number, token: number): void {
    this.innocent.push({ start, end, token });
  }

  /** Reports what waited long enough, now that the scan is at `token`. */
  advance(token: number): void {
    while (this.waiting.length > 0 && (this.waiting[0] as Waiting).token <= token - this.tokens) {
      this.report(this.waiting.shift() as Waiting);
    }
    while (this.innocent.length > 0 && (this.innocent[0]?.token ?? 0) < token - 2 * this.tokens) {
      this.innocent.shift();
    }
  }

  finish(): DetectionResult {
    while (this.waiting.length > 0) this.report(this.waiting.shift() as Waiting);
    return { matches: this.matches, counts: this.counts };
  }

  private report({ match }: Waiting): void {
    for (const span of this.innocent) if (covers(span, match)) return;
    // Still waiting, so found later: a longer match of the language over this one wins.
    for (const { match: other } of this.waiting) {
      const longer = other.end - other.start > match.end - match.start;
      if (other.language === match.language && longer && covers(other, match)) return;
    }
    const last = this.lastReported.get(match.language);
    if (last !== undefined && covers(last, match)) return; // the same place, twice
    this.lastReported.set(match.language, match);
    this.counts[match.language] = (this.counts[match.language] ?? 0) + 1;
    if ((this.counts[match.language] as number) <= LISTED_PER_LANGUAGE) this.matches.push(match);
  }
}

function covers(
  outer: { start: number; end: number },
  inner: { start: number; end: number },
): boolean {
  return outer.start <= inner.start && inner.end <= outer.end;
}
