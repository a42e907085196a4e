# bash completion for spand-gateway, spand-estimates, spandctl and spand-agent. The options come
# from each program's own --help (bash-completion's _parse_help), so they never go stale.
# Installed once per program name in bash-completion's completions directory.
_spand() {
  local cur prev words cword
  _init_completion -s || return
  case $prev in
    --config | -c | --pcap | --flows-out | --samples-out | --estimates-file | -f | \
    --redis-password-file | --report-token-file | --grpc-tls-cert | --grpc-tls-key | \
    --grpc-client-ca | --report-socket | --tls-ca | --tls-cert | --tls-key | --client-key-file)
      _filedir
      return
      ;;
    --interface | -i | --pace-device)
      _available_interfaces
      return
      ;;
    --cgroup | -g)
      _filedir -d
      return
      ;;
    --mode | -m)
      COMPREPLY=($(compgen -W 'auto bpf route' -- "$cur"))
      return
      ;;
    --clock)
      COMPREPLY=($(compgen -W 'redis wall' -- "$cur"))
      return
      ;;
    --window-rule)
      COMPREPLY=($(compgen -W 'rounds paper' -- "$cur"))
      return
      ;;
  esac
  $split && return
  # spandctl: the command is the first word that is neither an option nor an option's value.
  if [[ $1 == spandctl && $cur != -* ]]; then
    local i command=
    for ((i = 1; i < cword; i++)); do
      case ${words[i]} in
        --server | --timeout-ms | --tls-ca | --tls-cert | --tls-key | --tls-server-name) ((i++)) ;;
        -*) ;;
        *)
          command=${words[i]}
          break
          ;;
      esac
    done
    case $command in
      '') COMPREPLY=($(compgen -W 'get watch top cwnd losses' -- "$cur")) ;;
      losses) _filedir ;; # a --flows-out file
    esac
    return
  fi
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W '$(_parse_help "$1")' -- "$cur"))
    [[ ${COMPREPLY-} == *= ]] && compopt -o nospace
  fi
}
complete -F _spand spand-gateway spand-estimates spandctl spand-agent
