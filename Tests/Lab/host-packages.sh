# Sourced by build-image.sh and run.sh: installs the host's Debian packages that are missing, in one apt run
# (a fresh machine, like CI's, has none of them).
#
#   install_missing_packages LOG-PREFIX PACKAGE...
install_missing_packages() {
    local prefix=$1 package
    shift
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    ((${#missing[@]})) || return 0
    echo "$prefix: installing host packages: ${missing[*]}" >&2
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}
