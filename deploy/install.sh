#!/bin/bash
# Plinth site install script: run as root on a freshly installed Debian host with the
# site bundle (make bundle) copied onto it. It checks everything first and changes
# nothing when a check fails; then it unpacks the bundle under /opt/plinth/bundle,
# installs the packages, enrols the host and starts its services. Re-running it with
# the same arguments changes nothing and says so. `install.sh --help` for usage.
set -euo pipefail
umask 022
# Every expected failure says what to do (die); anything else still says where it was.
trap 'echo "install: error: unexpected failure at line $LINENO: $BASH_COMMAND" >&2' ERR

BUNDLE_ROOT=${PLINTH_BUNDLE_ROOT:-/opt/plinth/bundle}
AGENT_STATE=/var/lib/plinth
AGENT_IDENTITY=$AGENT_STATE/agent.json
COORD_DATA=/var/lib/plinth-coordinator
ADMIN_IDENTITY=${PLINTH_IDENTITY:-/root/.plinth/admin.json}
API_PORT=7440 JOIN_PORT=7441 RAFT_PORT=7442 GOSSIP_PORT=7443 AGENT_GOSSIP_PORT=7444

usage() {
	cat <<'EOF'
Usage: install.sh --bundle FILE|DIR MODE [options]

Modes (one):
  --init                first controller: create the site (coordinator init), start the
                        coordinator and enrol this host's agent with a token made here
  --join controller|witness
                        another coordinator; --token is its coordinator/witness token.
                        With --agent-token the host's agent is enrolled too
  --agent               an agent only (workers, storage); --token is the agent token

Options:
  --bundle FILE|DIR     the site bundle (plinth-bundle-VERSION.tar, or its unpacked dir)
  --name NAME           this host's name as declared in the site manifest (default: hostname)
  --site NAME           site name (--init)
  --bind IP             this host's management address (coordinators listen on it)
  --coordinator A,B     coordinators' enrolment addresses ip[:7441] (--join, --agent)
  --token TOKEN         one-time token from 'plinth-coordinator node enroll'
  --token-file FILE     read the token from FILE ('-': stdin) instead of the command line
  --agent-token TOKEN   with --join: the agent token of this host
  --agent-token-file F  read the agent token from F instead
  --role ROLE           with --init: the local agent's role (default controller)
  --profile lan|fast    coordinator timing profile (default lan; fast for labs)
  --agent-config FILE   install FILE as /etc/plinth/agent.yaml
  --help                this text

Examples:
  install.sh --bundle plinth-bundle-0.3.0.tar --init --site mysite --name c0 --bind 10.0.0.11
  install.sh --bundle plinth-bundle-0.3.0.tar --join controller --name c1 --bind 10.0.0.12 \
      --coordinator 10.0.0.11 --token "$(cat c1.token)" --agent-token "$(cat c1-agent.token)"
  install.sh --bundle plinth-bundle-0.3.0.tar --agent --name compute-0 \
      --coordinator 10.0.0.11,10.0.0.12 --token-file compute-0.token
EOF
}

say() { printf 'install: %s\n' "$*"; }
die() {
	printf 'install: error: %s\n' "$1" >&2
	shift
	for l in "$@"; do printf '  %s\n' "$l" >&2; done
	exit 1
}

bundle="" mode="" join_as="" name="" site="" bind="" coords="" token="" token_file="" agent_token="" agent_token_file=""
role=controller profile=lan agent_config=""
while [ $# -gt 0 ]; do
	a=$1
	case $a in
	--help | -h) usage; exit 0 ;;
	--init | --agent) [ -z "$mode" ] || die "give one mode: $mode and $a both given"; mode=${a#--} ;;
	--join)
		[ -z "$mode" ] || die "give one mode: $mode and $a both given"
		mode=join join_as=${2:-}
		case $join_as in controller | witness) ;; *) die "--join wants controller or witness, not '${join_as}'" ;; esac
		shift ;;
	--bundle | --name | --site | --bind | --coordinator | --token | --token-file | --agent-token | --agent-token-file | --role | --profile | --agent-config)
		[ $# -ge 2 ] || die "$a needs a value (see --help)"
		v=$2
		case $a in
		--bundle) bundle=$v ;; --name) name=$v ;; --site) site=$v ;; --bind) bind=$v ;;
		--coordinator) coords=$v ;; --token) token=$v ;; --token-file) token_file=$v ;;
		--agent-token) agent_token=$v ;; --agent-token-file) agent_token_file=$v ;; --role) role=$v ;; --profile) profile=$v ;;
		--agent-config) agent_config=$v ;;
		esac
		shift ;;
	*) die "unknown argument '$a' (see --help)" ;;
	esac
	shift
done

# --- checks: nothing below changes the host until every one has passed -------------
[ "$(id -u)" = 0 ] || die "must run as root" "try: sudo $0 $*"
[ -n "$mode" ] || die "give a mode: --init, --join controller|witness or --agent (see --help)"
if ! grep -qsE '^(ID=debian|ID_LIKE=.*debian)' /etc/os-release; then
	die "this is not a Debian host (/etc/os-release: $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-unreadable}"))" \
		"Plinth's packages are for Debian 12 (bookworm) or newer"
fi
[ -d /run/systemd/system ] || die "systemd is not running on this host (no /run/systemd/system)" \
	"Plinth's services are systemd units: boot the host with systemd as PID 1"
for c in dpkg dpkg-deb sha256sum tar systemctl ss; do
	command -v $c >/dev/null || die "$c not found" "install the Debian package that provides it (e.g. apt-get install iproute2 for ss)"
done
[ -n "$bundle" ] || die "--bundle is required: the plinth-bundle-VERSION.tar copied from the build host"
[ -e "$bundle" ] || die "bundle $bundle not found" "copy plinth-bundle-VERSION.tar onto this host and give its path"
: "${name:=$(hostname)}"
[[ $name =~ ^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$ ]] || die "--name '$name' is not a valid host name (lowercase letters, digits and -)"
case $profile in lan | fast) ;; *) die "--profile '$profile': want lan or fast" ;; esac
case $role in controller | worker | storage) ;; *) die "--role '$role': want controller, worker or storage" ;; esac
if [ -n "$token_file" ]; then
	[ -z "$token" ] || die "give one of --token and --token-file"
	if [ "$token_file" = - ]; then token=$(cat); else
		[ -r "$token_file" ] || die "token file $token_file not readable"
		token=$(cat "$token_file")
	fi
	token=$(printf '%s' "$token" | tr -d ' \n\r\t')
fi
if [ -n "$agent_token_file" ]; then
	[ -z "$agent_token" ] || die "give one of --agent-token and --agent-token-file"
	[ -r "$agent_token_file" ] || die "agent token file $agent_token_file not readable"
	agent_token=$(tr -d ' \n\r\t' <"$agent_token_file")
fi
[ -z "$agent_config" ] || [ -r "$agent_config" ] || die "--agent-config $agent_config not readable"

needs_ip() { [[ $2 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "$1 '$2' is not an IPv4 address"; }
case $mode in
init)
	[ -n "$site" ] || die "--init needs --site NAME"
	needs_ip --bind "$bind" ;;
join)
	needs_ip --bind "$bind"
	[ -n "$coords" ] || die "--join needs --coordinator (an existing coordinator's address)"
	[ -n "$token" ] || die "--join needs --token: run 'plinth-coordinator node enroll $name --role ${join_as/controller/coordinator}' on a controller" ;;
agent)
	[ -n "$coords" ] || die "--agent needs --coordinator (the coordinators' addresses)"
	[ -n "$token" ] || die "--agent needs --token: run 'plinth-coordinator node enroll $name --role worker' on a controller" ;;
esac
[ -z "$agent_token" ] || [ "$mode" = join ] || die "--agent-token goes with --join (with --agent, use --token)"

# Coordinators' enrolment addresses, port 7441 unless given.
join_addrs=()
IFS=, read -ra _cs <<<"$coords"
for c in "${_cs[@]}"; do
	[ -n "$c" ] || continue
	[[ $c == *:* ]] || c=$c:$JOIN_PORT
	join_addrs+=("$c")
done
join_list=$(IFS=,; echo "${join_addrs[*]}")

# The bundle: unpack a tar into a staging dir beside its final place, then verify.
work=$(mktemp -d /tmp/plinth-install.XXXXXX)
staging="" # a tar is unpacked beside its final place, so moving it there copies nothing
created=() # what this run made, removed again if a later step fails
cleanup() {
	rc=$?
	rm -rf "$work"
	[ -z "$staging" ] || rm -rf "$staging"
	if [ $rc -ne 0 ] && [ ${#created[@]} -gt 0 ]; then
		say "failed: undoing what this run changed"
		for ((i = ${#created[@]} - 1; i >= 0; i--)); do undo "${created[i]}"; done
	fi
	exit $rc
}
trap cleanup EXIT
undo() {
	case $1 in
	pkg:*) dpkg --purge "${1#pkg:}" >/dev/null 2>&1 || true ;;
	dir:*) rm -rf "${1#dir:}" ;;
	link:*) rm -f "${1#link:}" ;;
	relink:*) ln -sfn "${1#relink:}" "$BUNDLE_ROOT/current" ;;
	file:*) rm -f "${1#file:}" ;;
	unit:*) systemctl disable --now "${1#unit:}" >/dev/null 2>&1 || true ;;
	restore:*) f=${1#restore:}; mv -f "$f.plinth-install-old" "$f" 2>/dev/null || true ;;
	esac
}

# The bundle root (and /opt/plinth) are this run's to remove again if it made them.
for d in "${BUNDLE_ROOT%/*}" "$BUNDLE_ROOT"; do [ -e "$d" ] || created+=("dir:$d"); done
if [ -d "$bundle" ]; then
	src=$(cd "$bundle" && pwd)
else
	say "reading bundle $bundle"
	mkdir -p "$BUNDLE_ROOT"
	staging=$(mktemp -d "$BUNDLE_ROOT/.incoming.XXXXXX")
	tar -C "$staging" --no-same-owner -xf "$bundle" 2>"$work/tar.err" || die "bundle $bundle is not a readable tar archive: $(head -c 300 "$work/tar.err")" \
		"re-copy the bundle from the build host"
	top=$(find "$staging" -mindepth 1 -maxdepth 1 -type d -name 'plinth-bundle-*' | head -1)
	[ -n "$top" ] || die "bundle $bundle has no plinth-bundle-VERSION/ directory" "is this a bundle made by 'make bundle'?"
	src=$top
fi
[ -f "$src/SHA256SUMS" ] && [ -f "$src/manifest.json" ] || die "bundle $bundle lacks SHA256SUMS or manifest.json" "is this a bundle made by 'make bundle'?"
if ! (cd "$src" && sha256sum --quiet --strict -c SHA256SUMS) >"$work/sums" 2>&1; then
	die "bundle $bundle failed its checksums:" "$(grep -v '^sha256sum: WARNING' "$work/sums" | head -5)" \
		"the copy is damaged or was changed: re-copy the bundle from the build host"
fi
version=$(sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$src/manifest.json" | head -1)
[[ $version =~ ^[0-9A-Za-z][0-9A-Za-z.+~_-]*$ ]] || die "bundle manifest.json has no valid \"version\""
agent_deb=$(ls "$src"/debs/plinth-agent_*.deb 2>/dev/null | head -1 || true)
coord_deb=$(ls "$src"/debs/plinth-coordinator_*.deb 2>/dev/null | head -1 || true)
[ -n "$agent_deb" ] && [ -n "$coord_deb" ] || die "bundle $version has no plinth-agent and plinth-coordinator packages in debs/"

want_agent=1 want_coord=0
[ "$mode" = agent ] || want_coord=1
[ "$mode" != join ] || [ -n "$agent_token" ] || want_agent=0
debs=()
[ $want_agent = 0 ] || debs+=("$agent_deb")
[ $want_coord = 0 ] || debs+=("$coord_deb")

# Debian dependencies: present, or installable from the host's own mirror.
missing=()
for d in "${debs[@]}"; do
	deps=$(dpkg-deb -f "$d" Depends)
	IFS=, read -ra alts <<<"$deps"
	for alt in "${alts[@]}"; do
		ok=0 first=""
		IFS='|' read -ra opts <<<"$alt"
		for o in "${opts[@]}"; do
			p=$(echo "$o" | sed 's/(.*)//; s/[[:space:]]//g')
			[ -n "$p" ] || continue
			: "${first:=$p}"
			if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ]; then ok=1; break; fi
		done
		[ $ok = 1 ] || [ -z "$first" ] || missing+=("$first")
	done
done
if [ ${#missing[@]} -gt 0 ]; then
	say "installing Debian dependencies: ${missing[*]}"
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$work/apt" 2>&1; then
		die "missing Debian packages ${missing[*]}, and apt-get could not install them:" "$(tail -3 "$work/apt")" \
			"make them installable (the site's Debian mirror in /etc/apt/sources.list.d) or install them first"
	fi
fi

# What is already done (a re-run), and what would clash with what we start.
installed_version() { dpkg-query -W -f='${Status} ${Version}' "$1" 2>/dev/null | sed -n 's/^install ok installed //p' || true; }
deb_version() { dpkg-deb -f "$1" Version; }
port_user() { ss -Htlnp "sport = :$1" 2>/dev/null | grep -v plinth- | head -1 || true; }
coord_enrolled=0 agent_enrolled=0
[ -f "$COORD_DATA/coordinator.json" ] && coord_enrolled=1
[ -f "$AGENT_IDENTITY" ] && agent_enrolled=1
if [ $want_coord = 1 ] && [ $coord_enrolled = 0 ]; then
	for p in $API_PORT $JOIN_PORT $RAFT_PORT $GOSSIP_PORT; do
		u=$(port_user $p)
		[ -z "$u" ] || die "port $p is already in use on this host: $u" "stop what listens there; the coordinator needs ports $API_PORT-$GOSSIP_PORT on $bind"
	done
fi
if [ $want_agent = 1 ] && [ $agent_enrolled = 0 ]; then
	u=$(port_user $AGENT_GOSSIP_PORT)
	[ -z "$u" ] || die "port $AGENT_GOSSIP_PORT is already in use on this host: $u" "stop what listens there; the agent gossips on it"
fi
reach() {
	local hp=$1 host=${1%:*} port=${1##*:}
	timeout 3 bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null
}
if { [ "$mode" = join ] && [ $coord_enrolled = 0 ]; } || { [ $want_agent = 1 ] && [ $agent_enrolled = 0 ] && [ "$mode" != init ]; }; then
	ok=0 tried=()
	for c in "${join_addrs[@]}"; do
		if reach "$c"; then ok=1; break; fi
		tried+=("$c")
	done
	[ $ok = 1 ] || die "cannot reach any coordinator at ${tried[*]} (TCP connect failed)" \
		"check the address, that plinth-coordinator runs there, and that port ${JOIN_PORT} (enrolment) is open between the hosts"
fi

# --- changes ------------------------------------------------------------------------
changed=0
dest=$BUNDLE_ROOT/$version
if [ -d "$dest" ] && (cd "$dest" && sha256sum --quiet --strict -c SHA256SUMS) >/dev/null 2>&1; then
	:
else
	say "unpacking bundle $version into $dest"
	mkdir -p "$BUNDLE_ROOT"
	if [ -z "$staging" ]; then
		staging=$(mktemp -d "$BUNDLE_ROOT/.incoming.XXXXXX")
		cp -a "$src" "$staging/"
		src=$staging/$(basename "$src")
	fi
	[ ! -d "$dest" ] || rm -rf "$dest"
	mv "$src" "$dest"
	chmod 0755 "$dest"
	created+=("dir:$dest")
	changed=1
fi
if [ "$(readlink "$BUNDLE_ROOT/current" 2>/dev/null)" != "$version" ]; then
	old=$(readlink "$BUNDLE_ROOT/current" 2>/dev/null || true)
	if [ -n "$old" ]; then created+=("relink:$old"); else created+=("link:$BUNDLE_ROOT/current"); fi
	ln -sfn "$version" "$BUNDLE_ROOT/current.new" && mv -Tf "$BUNDLE_ROOT/current.new" "$BUNDLE_ROOT/current"
	changed=1
fi

for d in "${debs[@]}"; do
	d=$dest/debs/$(basename "$d")
	pkg=$(dpkg-deb -f "$d" Package)
	have=$(installed_version "$pkg")
	want=$(deb_version "$d")
	[ "$have" != "$want" ] || continue
	say "installing $pkg $want${have:+ (was $have)}"
	if ! DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "$d" >"$work/dpkg" 2>&1; then
		[ -n "$have" ] || created+=("pkg:$pkg")
		die "dpkg could not install $pkg:" "$(tail -5 "$work/dpkg")"
	fi
	[ -n "$have" ] || created+=("pkg:$pkg")
	changed=1
done

if [ -n "$agent_config" ] && [ $want_agent = 1 ] && ! cmp -s "$agent_config" /etc/plinth/agent.yaml; then
	say "installing $agent_config as /etc/plinth/agent.yaml"
	[ ! -f /etc/plinth/agent.yaml ] || cp -a /etc/plinth/agent.yaml /etc/plinth/agent.yaml.plinth-install-old
	install -m 0644 "$agent_config" /etc/plinth/agent.yaml
	created+=("restore:/etc/plinth/agent.yaml")
	changed=1
fi

start_unit() {
	if ! systemctl is-enabled --quiet "$1" 2>/dev/null || ! systemctl is-active --quiet "$1"; then
		say "starting $1"
		systemctl enable --quiet "$1"
		created+=("unit:$1")
		if ! systemctl start "$1"; then
			die "$1 did not start:" "$(journalctl -u "$1" -n 8 --no-pager 2>/dev/null | tail -8)" "see: journalctl -u $1"
		fi
		changed=1
	fi
}

if [ $want_coord = 1 ]; then
	if [ $coord_enrolled = 0 ]; then
		if [ "$mode" = init ]; then
			say "creating site $site with coordinator $name on $bind"
			created+=("dir:$COORD_DATA" "file:$ADMIN_IDENTITY")
			plinth-coordinator init --name "$name" --site "$site" --bind "$bind" --profile "$profile" \
				--data-dir "$COORD_DATA" --admin-identity "$ADMIN_IDENTITY" >"$work/out" 2>&1 ||
				die "plinth-coordinator init failed:" "$(tail -5 "$work/out")"
		else
			say "enrolling coordinator $name ($join_as) with $join_list"
			w=(); [ "$join_as" = witness ] && w=(--witness)
			created+=("dir:$COORD_DATA")
			if ! plinth-coordinator join --name "$name" --bind "$bind" --profile "$profile" --data-dir "$COORD_DATA" \
				--coordinator "$join_list" --token "$token" "${w[@]}" >"$work/out" 2>&1; then
				die "the coordinators refused to enrol $name:" "$(tail -3 "$work/out")" \
					"ask for a new token: plinth-coordinator node enroll $name --role ${join_as/controller/coordinator}"
			fi
		fi
		changed=1
	fi
	start_unit plinth-coordinator
fi

if [ $want_agent = 1 ]; then
	if [ $agent_enrolled = 0 ]; then
		atoken=$token
		alist=$join_list
		[ "$mode" != join ] || atoken=$agent_token
		if [ "$mode" = init ]; then
			alist=$bind:$JOIN_PORT
			atoken=$(plinth-coordinator --identity "$ADMIN_IDENTITY" node enroll "$name" --role "$role" --ttl 10m 2>"$work/err") ||
				die "could not make the local agent's token:" "$(tail -3 "$work/err")"
		fi
		say "enrolling agent $name with $alist"
		[ -d "$AGENT_STATE" ] || created+=("dir:$AGENT_STATE")
		if ! printf '%s\n' "$atoken" | plinth-agent join --name "$name" --coordinator "$alist" --token-file - >"$work/out" 2>&1; then
			rm -f "$AGENT_IDENTITY"
			die "the coordinators refused to enrol agent $name:" "$(tail -3 "$work/out")" \
				"ask for a new token: plinth-coordinator node enroll $name --role worker (or controller)"
		fi
		created+=("file:$AGENT_IDENTITY")
		changed=1
	fi
	start_unit plinth-agent
fi

created=()
if [ $changed = 0 ]; then
	say "nothing to do: bundle $version, packages, enrolment and services are already in place"
else
	say "done: $name runs bundle $version ($mode)"
fi
