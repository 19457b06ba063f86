/**
 * The EICAR anti-virus test file, assembled at run time: no file in the repository holds it whole,
 * so antivirus on a developer's machine does not quarantine the sources.
 */
export function eicar(): Buffer {
  const parts = [
    'X5O!P%@AP[4\\PZX54(P^)7CC)7}$',
    'EICAR',
    '-STANDARD-ANTIVIRUS',
    '-TEST-FILE!$H+H*',
  ];
  return Buffer.from(parts.join(''), 'latin1');
}
