/** A duration for people: "45 s", "12 min", "5 h", "3 d" (rounded down). */
export function duration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 120) return `${s} s`;
  if (s < 7_200) return `${Math.floor(s / 60)} min`;
  if (s < 172_800) return `${Math.floor(s / 3_600)} h`;
  return `${Math.floor(s / 86_400)} d`;
}

/** A date in ISO 8601 as UTC to the second: "2024-05-01 12:00:00 UTC". */
export function utc(date: string | number): string {
  const parsed = new Date(date);
  return Number.isNaN(parsed.getTime())
    ? String(date)
    : `${parsed.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** Text cut to `most` characters, with an ellipsis when cut (errors can be long). */
export function shortened(text: string, most: number): string {
  return text.length <= most ? text : `${text.slice(0, most - 1)}…`;
}

/** A query string parameter as one bounded string: '' when absent, repeated or too long. */
export function queryText(value: unknown, most: number): string | null {
  if (value === undefined) return '';
  if (typeof value !== 'string' || value.length > most) return null;
  return value;
}
