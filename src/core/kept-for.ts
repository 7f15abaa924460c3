/**
 * The value `map` keeps for `key`, made by `make` the first time it is asked for: what is built
 * once per database pool, key list or signing key, and is gone with it.
 */
export function keptFor<K extends object, V>(map: WeakMap<K, V>, key: K, make: (key: K) => V): V {
  let value = map.get(key);
  if (value === undefined) map.set(key, (value = make(key)));
  return value;
}
