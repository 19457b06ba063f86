import {
  englishDataset,
  englishRecommendedTransformers,
  type MatchPayload,
  RegExpMatcher,
} from 'obscenity';
import { otherLanguageWords } from './word-lists.js';

/** One obscenity: where it is in the examined text (UTF-16 offsets, end exclusive) and which word. */
export interface LanguageMatch {
  language: string;
  start: number;
  end: number;
  term: string;
}

export interface DetectionResult {
  matches: LanguageMatch[];
  /** How many characters of the text the English detector examined (it sees a prefix). */
  englishChars: number;
}

/**
 * Innocent words that obscenity's English patterns catch (the Scunthorpe problem); its dataset
 * already whitelists many others (assassin, cocktail, Scunthorpe, ...).
 */
const ENGLISH_WHITELIST = [
  'cockpit',
  'cockpits',
  'shiitake',
  'pussycat',
  'pussycats',
  'pussy willow',
  'penistone',
  'cum laude',
  'magna cum laude',
  'summa cum laude',
];

/**
 * Compatibility characters (full-width letters, ligature-free forms) folded to their plain form
 * where that keeps the length, so offsets stay those of the text. Latin letters are left as they are.
 */
function foldCompatibilityForms(text: string): string {
  return text.replace(/[\u0250-\uffff]/g, (char) => {
    const folded = char.normalize('NFKC');
    return folded.length === char.length ? folded : char;
  });
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Obscene language in English (obscenity: resists leetspeak, repeated letters and look-alike
 * characters, but costs about 1.5 s per MB, hence a prefix) and in the other languages of
 * word-lists.ts (whole words, case-insensitive, over the whole text).
 */
export class LanguageDetector {
  private readonly english = new RegExpMatcher({
    ...englishDataset.build(),
    ...englishRecommendedTransformers,
    whitelistedTerms: [...(englishDataset.build().whitelistedTerms ?? []), ...ENGLISH_WHITELIST],
  });
  private readonly others: RegExp;
  private readonly languagesOf = new Map<string, string[]>();

  constructor(private readonly englishPrefixChars: number) {
    for (const [language, words] of otherLanguageWords()) {
      for (const word of words) {
        const languages = this.languagesOf.get(word) ?? [];
        languages.push(language);
        this.languagesOf.set(word, languages);
      }
    }
    // Longest first, so "hijo de puta" wins over "puta"; letters and digits around a word make it
    // part of another word ("vehículo" holds no "culo").
    const alternatives = [...this.languagesOf.keys()]
      .sort((a, b) => b.length - a.length)
      .map(escapeRegExp);
    this.others = new RegExp(
      `(?<![\\p{L}\\p{N}])(?:${alternatives.join('|')})(?![\\p{L}\\p{N}])`,
      'giu',
    );
  }

  detect(text: string): DetectionResult {
    const folded = foldCompatibilityForms(text);
    const prefix = folded.slice(0, this.englishPrefixChars);
    const matches: LanguageMatch[] = [];
    const seen = new Set<string>();
    for (const match of this.english.getAllMatches(prefix, true)) {
      // Two patterns can find the same word (e.g. "sh1t"); report the place once.
      const key = `${match.startIndex}:${match.endIndex}`;
      if (seen.has(key)) continue;
      seen.add(key);
      matches.push({
        language: 'en',
        start: match.startIndex,
        end: match.endIndex + 1,
        term: this.englishTerm(match),
      });
    }
    for (const match of folded.matchAll(this.others)) {
      const term = match[0].toLowerCase();
      for (const language of this.languagesOf.get(term) ?? []) {
        matches.push({ language, start: match.index, end: match.index + match[0].length, term });
      }
    }
    return { matches, englishChars: prefix.length };
  }

  private englishTerm(match: MatchPayload): string {
    return englishDataset.getPayloadWithPhraseMetadata(match).phraseMetadata?.originalWord ?? '?';
  }
}
