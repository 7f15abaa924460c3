/** What keptFor needs of a map: a Map or a WeakMap. */
interface Keeping<K, V> {
  get(key: K): V | undefined;
  set(key: K, value: V): unknown;
}

/**
 * The value `map` keeps for `key`, made by `make` the first time it is asked for: what is built
 * once per database pool, key list or signing key (a WeakMap: gone with it), or gathered by key.
 */
export function keptFor<K, V>(map: Keeping<K, V>, key: K, make: (key: K) => V): V {
  let value = map.get(key);
  if (value === undefined) map.set(key, (value = make(key)));
  return value;
}
