# migbake-wait: start this GPU plugin once migbake has restored the node's MIG layout
managed='/host/etc/migbake/managed'
ready='/host/run/migbake/mig-ready'
if [ ! -e "$managed" ]; then
  echo "migbake-wait: no $managed: migbake does not restore MIG on this node; starting now"
  exit 0
fi
until [ -e "$ready" ]; do
  echo "migbake-wait: waiting for $ready: the node's MIG layout is not restored yet"
  sleep 5
done
echo "migbake-wait: the MIG layout is restored: $(head -c 200 "$ready")"
