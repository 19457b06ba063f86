/**
 * The kind of a finding, from its first segments: a small fixed set, unlike finding names, which
 * carry signature names without bound (the metrics label items with it).
 */
export type FindingCategory =
  | 'malware'
  | 'malware-heuristics'
  | 'nsfw-image'
  | 'nsfw-language'
  | 'other';

export const FINDING_CATEGORIES: readonly FindingCategory[] = [
  'malware',
  'malware-heuristics',
  'nsfw-image',
  'nsfw-language',
  'other',
];

/**
 * `content.malicious.*` and the older `av.*` names come from clamd; its heuristics (content over
 * its limits, encrypted content, phishing) are told apart from signatures. The NSFW engines name
 * `content.image.nsfw.*` and `content.<language>.language.nsfw.*`.
 */
export function findingCategory(finding: string): FindingCategory {
  if (/^(?:content\.malicious|av)\.heuristics\./.test(finding)) return 'malware-heuristics';
  if (/^(?:content\.malicious|av)\./.test(finding)) return 'malware';
  if (finding.startsWith('content.image.nsfw.')) return 'nsfw-image';
  if (/^content\.[a-z]+\.language\.nsfw\./.test(finding)) return 'nsfw-language';
  return 'other';
}
