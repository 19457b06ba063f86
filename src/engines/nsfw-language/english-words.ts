import type { WordSource } from './lexicon.js';

/**
 * English obscenities as whole words: each term with the words it takes (inflections and the
 * compounds in use), matched only as whole words or phrases. The terms are those of the
 * `obscenity` package's English dataset (itself from the cuss project), less words that are
 * ordinary words far more often than not: "sex"/"sexy", "scat" (jazz singing, droppings), "abo"
 * (ABO blood groups), "negro" (Spanish and Portuguese for black), "retard" (French for delay) and
 * "pornography" (a subject, not a swear word); plus a few British ones.
 * Spellings with digits, symbols or repeated letters ("sh1t", "a$$", "fuuuck") are not listed:
 * the matcher reads them (lexicon.ts).
 */
// biome-ignore format: word lists read better packed than one word a line
const TERMS: Record<string, string> = {
  abbo: 'abbo, abbos',
  abeed: 'abeed, abeeds',
  africoon: 'africoon, africoons',
  anal: 'anal, anally, analsex',
  anus: 'anus, anuses',
  arabush: 'arabush',
  arse: 'arse, arses, arsed, arsehole, arseholes, arsewipe',
  ass: 'ass, asses, asshole, assholes, asshat, asshats, asswipe, asswipes, assface, asshead, ' +
    'assclown, asskisser, asskissing, asslick, asslicker, dumbass, dumbasses, fatass, smartass, ' +
    'smartasses, lardass, kissass',
  bastard: 'bastard, bastards',
  bestiality: 'bestiality',
  bitch: 'bitch, bitches, bitchy, bitching, bitchin, biatch, biatches, biotch, bytch',
  blowjob: 'blowjob, blowjobs, blow job, blow jobs',
  bollocks: 'bollock, bollocks, bollox, bollocking',
  boob: 'boob, boobs',
  buttplug: 'buttplug, buttplugs, butt plug, butt plugs',
  chingchong: 'chingchong, ching chong',
  chink: 'chink, chinks',
  cock: 'cock, cocks, cocksucker, cocksuckers, cocksucking, cockhead, cockface, cockmunch, cockmuncher, cocksmoker',
  cuck: 'cuck, cucks, cucked',
  cum: 'cum, cums, cumming, cummed, cumshot, cumshots, cumslut, cumdump, cumbucket',
  cunt: 'cunt, cunts',
  deepthroat: 'deepthroat, deepthroats, deepthroating, deepthroated',
  dick: 'dick, dicks, dickhead, dickheads, dickface, dickwad, dickwads, dickweed, dickish, ' +
    'dickless, dicking',
  dildo: 'dildo, dildos',
  doggystyle: 'doggystyle, doggy style, doggie style, doggiestyle',
  'double penetration': 'double penetration',
  douchebag: 'douchebag, douchebags',
  dyke: 'dyke, dykes',
  ejaculate: 'ejaculate, ejaculates, ejaculated, ejaculating, ejaculation, ejaculations, ejakulate',
  fag: 'fag, fags, faggot, faggots, faggy, fagot, fagots, faggit',
  felch: 'felch, felched, felcher, felching',
  fellatio: 'fellatio, fellate, fellated, fellating',
  'finger bang': 'fingerbang, fingerbanging, finger bang',
  fisting: 'fisting',
  fuck: 'fuck, fucks, fucked, fucker, fuckers, fucking, fuckin, fuckface, fuckhead, fuckwit, ' +
    'fuckup, fuckoff, fucktard, motherfucker, motherfuckers, motherfucking, clusterfuck, fuk, fuks, fukd, fuked, fuker, fukers, fuking, fukin, fukk, fukker, fukkers, fukkin, ' +
    'fukking, fck, fcks, fcked, fcker, fckers, fcking, fckin, phuk, phuks, phuked, phuking, ' +
    'phukking, phuq, fuq, mofo, mofos',
  gangbang: 'gangbang, gangbangs, gangbanged, gangbanging, gang bang',
  handjob: 'handjob, handjobs, hand job, hand jobs',
  hentai: 'hentai',
  hooker: 'hooker, hookers',
  incest: 'incest, incestuous',
  'jerk off': 'jerkoff, jerkoffs, jerk off, jerks off, jerking off, jerked off, jackoff, ' +
    'jack off, jacking off',
  jizz: 'jizz, jizzed, jizm, jism, jiz',
  kike: 'kike, kikes',
  knobhead: 'knobhead, knobheads, bellend, bellends',
  lubejob: 'lubejob',
  masturbate: 'masturbate, masturbates, masturbated, masturbating, masturbation, masturbator, ' +
    'masterbate, masterbates, masterbating, masterbation',
  nigger: 'nigger, niggers, nigga, niggas, niggaz, niggah, nig, nigs',
  orgasm: 'orgasm, orgasms, orgasmic',
  orgy: 'orgy, orgies',
  penis: 'penis, penises, pnis',
  piss: 'piss, pissed, pisses, pisser, pissers, pissing, pissoff, pisshead, pissy, pisspot',
  porn: 'porn, porno, pornos, porns, pornstar, pornstars',
  prick: 'prick, pricks',
  pussy: 'pussy, pussies, pussys',
  rape: 'rape, rapes, raped, raping, rapist, rapists',
  retard: 'retarded', // "retard" is French for delay
  schlong: 'schlong, schlongs',
  semen: 'semen',
  shit: 'shit, shits, shitty, shittier, shittiest, shitting, shitted, shite, shithead, shitheads, ' +
    'shitface, shitfaced, shithole, shitholes, shitstorm, shitload, shitloads, shitbag, shitter, ' +
    'shitless, shitpost, bullshit, bullshits, bullshitting, bullshitter, bullshitted, horseshit, ' +
    'dipshit, dipshits, apeshit, batshit, chickenshit, dogshit',
  skank: 'skank, skanks, skanky',
  slut: 'slut, sluts, slutty',
  spastic: 'spastic, spastics',
  tit: 'tit, tits, titty, titties, tittie, tiddies, tities',
  tosser: 'tosser, tossers',
  tranny: 'tranny, trannies, trany',
  turd: 'turd, turds',
  twat: 'twat, twats, twunt',
  vagina: 'vagina, vaginas',
  whore: 'whore, whores, whorehouse',
  wank: 'wank, wanks, wanker, wankers, wanking, wanked, wanky',
};

/**
 * Stems that stay obscene whatever follows them in the word ("bitchass", "cuntish"). Not read in
 * a word in mixed case ("AMHFcuK8bF" is random, not a word): its listed forms are.
 */
const PREFIXES: Record<string, string[]> = {
  bitch: ['bitch'],
  cock: ['cocksuck'],
  cunt: ['cunt'],
  dildo: ['dildo'],
  jizz: ['jizz'],
  nigger: ['nigger', 'nigga'],
  whore: ['whore'],
};

/**
 * Terms that are also names: one written as a name ("Dick", "Cumming") next to another name
 * ("Dick Fowles", "Philip K. Dick", "John Lee Hooker", "Murray Cumming") or in the possessive
 * ("Dick's") is not reported.
 */
export const ENGLISH_NAMES = new Set(['cum', 'dick', 'dyke', 'hooker']);

/** No English word holds these, so they are obscene anywhere in a word ("motherfucker"). */
const ANYWHERE: Record<string, string[]> = { fuck: ['fuck', 'fvck', 'phuck', 'fcuk'] };

/**
 * Innocent phrases holding a listed word: a match inside one of them is not reported. Words
 * inside longer words need none (whole words only): Scunthorpe, cockpit, therapist, analysis.
 */
export const ENGLISH_INNOCENT = [
  'brainfuck', // a programming language, in documentation
  'cum laude',
  'cum grano salis',
  'moby dick',
  'spotted dick',
  'philip k dick',
  'dick van dyke',
  'tom dick and harry',
  'van dyke',
  "offa's dyke",
  'tit for tat',
  'blue tit',
  'blue tits',
  'great tit',
  'great tits',
  'coal tit',
  'coal tits',
  'pussy willow',
  'pussy willows',
  'oilseed rape',
  'chink in',
  'chinks in',
  'chink of',
];

export function englishWords(): WordSource[] {
  const terms = new Set([
    ...Object.keys(TERMS),
    ...Object.keys(PREFIXES),
    ...Object.keys(ANYWHERE),
  ]);
  return [...terms].map((term) => ({
    language: 'en',
    term,
    forms: (TERMS[term] ?? '')
      .split(',')
      .map((form) => form.trim())
      .filter(Boolean),
    prefixes: PREFIXES[term],
    anywhere: ANYWHERE[term],
  }));
}
