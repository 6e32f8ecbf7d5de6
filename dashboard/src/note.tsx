// The line under a card that answers the last thing done on it: what was done, or why not.

/** Renders nothing while `text` is empty; `invalid` marks a note about the user's input. */
export function Note(props: { text: string; testid: string; invalid?: boolean }) {
  if (props.text === '') return null;
  return (
    <p class={props.invalid === true ? 'note invalid' : 'note'} data-testid={props.testid}>
      {props.text}
    </p>
  );
}
