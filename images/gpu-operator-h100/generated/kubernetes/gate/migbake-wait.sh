# migbake-wait: start this GPU plugin once migbake has restored the node's MIG layout (run with sh -c)
# shellcheck shell=sh
ready='/host/run/migbake/mig-ready'
managed=''
# the node is migbake's where one of these exists (the second on Talos, whose machine config writes under /var)
for marker in '/host/etc/migbake/managed' '/host/var/lib/migbake/managed'; do
  if [ -z "$managed" ] && [ -e "$marker" ]; then managed="$marker"; fi
done
if [ -z "$managed" ]; then
  echo "migbake-wait: no marker file: migbake does not restore MIG on this node; starting now"
  exit 0
fi
until [ -e "$ready" ]; do
  echo "migbake-wait: waiting for $ready: the node's MIG layout is not restored yet"
  sleep 5
done
echo "migbake-wait: the MIG layout is restored: $(head -c 200 "$ready")"
