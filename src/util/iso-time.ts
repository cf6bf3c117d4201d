/**
 * `date.toISOString()`, the same text, computed in JavaScript: V8's own builds its date cache on
 * the first call, and with it the time-zone cache, which reads ICU's zone data (~0.6 MB of the
 * node binary's pages resident for the process's life, though an ISO time is UTC and needs no
 * zone). `hintbox run` stamps its log lines and audit records with it (issue 34). hintbox's own
 * code calls this, never `toISOString` (eslint). Years 1970–9999 are computed here; any other
 * time value, and an invalid one (a RangeError), are left to `toISOString` itself.
 */
export function isoTime(time: Date | number): string {
  const ms = typeof time === 'number' ? Math.trunc(time) : time.getTime();
  if (!(ms >= 0 && ms < LAST_FOUR_DIGIT_YEAR_END)) return new Date(ms).toISOString(); // eslint-disable-line no-restricted-syntax
  const days = Math.floor(ms / DAY_MS);
  const inDay = ms - days * DAY_MS;
  // Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's civil_from_days; the era is
  // 400 years, starting 0000-03-01, so that a leap day falls at the end of its year).
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const dayOfEra = z - era * 146097;
  const yearOfEra = Math.floor(
    (dayOfEra - Math.floor(dayOfEra / 1460) + Math.floor(dayOfEra / 36524) - Math.floor(dayOfEra / 146096)) / 365,
  );
  const dayOfYear = dayOfEra - (365 * yearOfEra + Math.floor(yearOfEra / 4) - Math.floor(yearOfEra / 100));
  const monthFromMarch = Math.floor((5 * dayOfYear + 2) / 153);
  const day = dayOfYear - Math.floor((153 * monthFromMarch + 2) / 5) + 1;
  const month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9;
  const year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0);
  const hours = Math.floor(inDay / 3_600_000);
  const minutes = Math.floor(inDay / 60_000) % 60;
  const seconds = Math.floor(inDay / 1000) % 60;
  const millis = inDay % 1000;
  return `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T${pad(hours, 2)}:${pad(minutes, 2)}:${pad(seconds, 2)}.${pad(millis, 3)}Z`;
}

const DAY_MS = 86_400_000;
/** 10000-01-01T00:00:00.000Z: from there `toISOString` writes an expanded year (+010000). */
const LAST_FOUR_DIGIT_YEAR_END = 253_402_300_800_000;

function pad(n: number, width: number): string {
  return String(n).padStart(width, '0');
}
