# bash completion for tensh(1); installed by `make install` under
# share/bash-completion/completions/tensh
_tensh() {
  local cur prev
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  case "$prev" in
    -e|-l) return 0 ;;
    --nproc) COMPREPLY=($(compgen -W "1 2 4 8" -- "$cur")); return 0 ;;
    --jupyter) COMPREPLY=($(compgen -W "install" -- "$cur")); return 0 ;;
    install) [ "${COMP_WORDS[1]}" = --jupyter ] && { COMPREPLY=($(compgen -W "--user --prefix" -- "$cur")); return 0; } ;;
  esac
  if [ "$COMP_CWORD" -eq 1 ] && [[ "$cur" != -* ]]; then
    COMPREPLY=($(compgen -W "bench" -- "$cur"))
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY+=($(compgen -W "-e -i -l -v -W -h --nproc --jupyter --" -- "$cur"))
  else
    COMPREPLY+=($(compgen -f -X '!*.lua' -- "$cur") $(compgen -d -- "$cur"))
  fi
}
complete -o filenames -F _tensh tensh
